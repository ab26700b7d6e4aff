"""Ctrl-C in `corral run`: the run stops, says how to resume, and the store stays whole."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

BENCHMARK = textwrap.dedent(
    """
    import os, sys
    import anyio
    import corral
    from corral import BenchmarkTaskMetadata as Meta, Final
    from corral.testing import FakeEnvironment

    class Agent:
        async def act(self, session):
            if os.environ.get("BLOCK") and session.task_id == "t3":
                print("blocked", file=sys.stderr, flush=True)
                await anyio.Event().wait()  # until cancelled
            return Final(session.task_id)

    benchmark = corral.Benchmark(
        tasks={f"t{i}": Meta("a", "e") for i in range(6)},
        agents={"a": Agent()},
        environments={"e": FakeEnvironment()},
        run_defaults={"max_parallel": 1},
    )
    """
)


def test_ctrl_c_stops_the_run_and_the_next_run_resumes(tmp_path: Path) -> None:
    bench, store = tmp_path / "bench.py", tmp_path / "store.db"
    bench.write_text(BENCHMARK)
    command = [
        sys.executable,
        "-m",
        "corral",
        "run",
        str(bench),
        "--store",
        str(store),
        "--no-progress",
    ]
    child = subprocess.Popen(
        command,
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "BLOCK": "1"},
    )
    assert child.stderr is not None
    assert child.stderr.readline().strip() == "blocked"  # t0..t2 are done, t3 is running
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 130
    assert "interrupted: resume with the same command" in err
    assert "Traceback" not in err

    db = sqlite3.connect(store)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    done = db.execute("SELECT COUNT(*) FROM commits WHERE kind = 'evaluation'").fetchone()[0]
    assert done == 3
    db.close()

    again = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "BLOCK"},
    )
    assert again.returncode == 0, again.stderr
    assert "resuming bench: 3 of 6 trials done" in again.stderr
    assert "completed 6" in again.stdout
