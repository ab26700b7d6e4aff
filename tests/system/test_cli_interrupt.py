"""Ctrl-C in `corral run`: the run stops, says how to resume, and the store stays whole."""

from __future__ import annotations

import os
import pty
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..support.child_lines import Lines

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


BLOCKING = textwrap.dedent(
    """
    import sqlite3, sys, time
    import anyio
    import corral
    from corral import BenchmarkTaskMetadata as Meta, Final
    from corral.testing import FakeEnvironment

    class Agent:
        async def act(self, session):
            if session.task_id == "t2":
                # t0 and t1 are finished; wait until the store has them (a Ctrl-C
                # counts durable trials), then block.
                db = sqlite3.connect(sys.argv[sys.argv.index("--store") + 1])
                query = "SELECT COUNT(*) FROM commits WHERE kind = 'evaluation'"
                while db.execute(query).fetchone()[0] < 2:
                    await anyio.sleep(0.01)
                db.close()
                print("blocked", file=sys.stderr, flush=True)
                if "{HOW}" == "loop":
                    time.sleep(3600)  # blocks the event loop itself
                else:
                    await anyio.to_thread.run_sync(time.sleep, 3600)  # a worker thread
            return Final(session.task_id)

    benchmark = corral.Benchmark(
        tasks={f"t{i}": Meta("a", "e") for i in range(4)},
        agents={"a": Agent()},
        environments={"e": FakeEnvironment()},
        run_defaults={"max_parallel": 1},
    )
    """
)


@pytest.mark.parametrize("how", ["loop", "thread"])
def test_a_second_ctrl_c_exits_at_once_while_user_code_blocks(tmp_path: Path, how: str) -> None:
    bench, store = tmp_path / "bench.py", tmp_path / "store.db"
    bench.write_text(BLOCKING.replace("{HOW}", how))
    command = [sys.executable, "-m", "corral", "run", str(bench), "--store", str(store)]
    child = subprocess.Popen(command + ["--no-progress"], stderr=subprocess.PIPE, text=True)
    assert child.stderr is not None
    lines = Lines(child.stderr)
    try:
        lines.until("blocked")  # t0 and t1 are done; t2 blocks
        child.send_signal(signal.SIGINT)
        # Trials count once observers heard they are durable: with the event loop
        # blocked right after t1's commits landed, that may not have happened yet.
        stopping = lines.until("stopping")
        assert re.fullmatch(
            r"stopping: ([0-2]) of 4 trials done; Ctrl-C again to exit at once", stopping
        ), stopping
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=30) == 130
        rest = lines.rest()
    finally:
        child.kill()
    assert re.match(r"interrupted at once \([0-2] of 4 trials done\)", rest), rest
    assert len(rest.strip().splitlines()) == 1 and "Traceback" not in rest

    db = sqlite3.connect(store)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    done = db.execute("SELECT COUNT(*) FROM commits WHERE kind = 'evaluation'").fetchone()[0]
    kinds = db.execute("SELECT kind, COUNT(*) FROM commits GROUP BY kind").fetchall()
    assert done == 2, kinds
    db.close()


def _signals_as_a_terminal_leaves_them() -> None:
    """In the child: SIGHUP at its default, as a shell started from a terminal leaves
    it. The suite itself may run under ``nohup`` (a CI job's wrapper), which ignores it,
    and corral rightly keeps a signal its parent ignored (the test below)."""
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_stops_the_run_as_ctrl_c_does(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """A CI runner's cancel (SIGTERM) or a closed terminal (SIGHUP) is a first Ctrl-C:
    what finished is written, the process says how to resume and exits 128 + the
    signal's number, as a shell reports a death by it."""
    bench, store = tmp_path / "bench.py", tmp_path / "store.db"
    bench.write_text(BENCHMARK)
    command = [sys.executable, "-m", "corral", "run", str(bench), "--store", str(store)]
    child = subprocess.Popen(
        [*command, "--no-progress"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "BLOCK": "1"},
        preexec_fn=_signals_as_a_terminal_leaves_them,
    )
    assert child.stderr is not None
    assert child.stderr.readline().strip() == "blocked"  # t0..t2 are done, t3 is running
    child.send_signal(signum)
    _, err = child.communicate(timeout=30)
    assert child.returncode == 128 + signum, err
    assert f"stopping on {signum.name}:" in err
    assert f"{signum.name} again to exit at once" in err  # not Ctrl-C: a runner sent it
    assert "interrupted: resume with the same command" in err
    assert "Traceback" not in err

    db = sqlite3.connect(store)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    done = db.execute("SELECT COUNT(*) FROM commits WHERE kind = 'evaluation'").fetchone()[0]
    db.close()
    assert done == 3  # nothing finished was lost


def test_a_second_ctrl_c_restores_the_cursor_where_the_display_hid_it(tmp_path: Path) -> None:
    """With ``--json`` the live display draws on stderr (here a terminal as far as rich
    knows, ``TTY_COMPATIBLE=1``): exiting at once shows the cursor again there, and
    stdout, the JSON's file, gets no escape sequence."""
    bench, store = tmp_path / "bench.py", tmp_path / "store.db"
    bench.write_text(BLOCKING.replace("{HOW}", "thread"))
    command = [sys.executable, "-m", "corral", "run", str(bench), "--store", str(store)]
    child = subprocess.Popen(
        [*command, "--json", "--progress", "rich"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "TTY_COMPATIBLE": "1"},
    )
    assert child.stderr is not None and child.stdout is not None
    lines = Lines(child.stderr)
    try:
        # Lines start with the display's cursor moves: look for the words inside.
        while "blocked" not in lines.queue.get(timeout=60):
            pass
        child.send_signal(signal.SIGINT)
        while "stopping:" not in lines.queue.get(timeout=60):  # the display says so
            pass
        child.send_signal(signal.SIGINT)
        assert child.wait(timeout=30) == 130
        out, err = child.stdout.read(), lines.rest()
    finally:
        child.kill()
    assert out == "", repr(out)
    assert "\x1b[?25h" in err, repr(err)


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP (Windows)")
def test_a_signal_ignored_by_the_parent_stays_ignored(tmp_path: Path) -> None:
    """Under ``nohup`` (SIGHUP ignored from the start) a closed terminal does not stop
    the run: corral stops on a signal its parent left to it, not on one it ignored."""
    bench, store = tmp_path / "bench.py", tmp_path / "store.db"
    bench.write_text(BENCHMARK)
    command = [sys.executable, "-m", "corral", "run", str(bench), "--store", str(store)]
    child = subprocess.Popen(
        [*command, "--no-progress"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "BLOCK": "1"},
        preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN),  # nohup
    )
    assert child.stderr is not None
    assert child.stderr.readline().strip() == "blocked"
    child.send_signal(signal.SIGHUP)  # ignored: the kernel drops it
    child.send_signal(signal.SIGTERM)  # what stops the run
    _, err = child.communicate(timeout=30)
    assert "SIGHUP" not in err
    assert "stopping on SIGTERM:" in err
    assert child.returncode == 128 + signal.SIGTERM, err


@pytest.mark.skipif(not hasattr(signal, "SIGHUP"), reason="no SIGHUP (Windows)")
def test_sighup_from_a_closed_terminal_exits_129(tmp_path: Path) -> None:
    """SIGHUP comes as the terminal goes away: writing there fails (EIO), which is no
    reason to exit 1 as if Corral had failed. The run stops as on SIGHUP, exit 129."""
    bench, store = tmp_path / "bench.py", tmp_path / "store.db"
    bench.write_text(BENCHMARK)
    command = [sys.executable, "-m", "corral", "run", str(bench), "--store", str(store)]
    master, terminal = pty.openpty()
    child = subprocess.Popen(
        [*command, "--no-progress"],
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env={**os.environ, "BLOCK": "1"},
        start_new_session=True,
        preexec_fn=_signals_as_a_terminal_leaves_them,
    )
    os.close(terminal)
    seen = b""
    while b"blocked" not in seen:  # t0..t2 are done, t3 is running
        seen += os.read(master, 4096)
    os.close(master)  # the terminal is gone: writing there is EIO
    child.send_signal(signal.SIGHUP)
    assert child.wait(timeout=30) == 128 + signal.SIGHUP

    db = sqlite3.connect(store)
    done = db.execute("SELECT COUNT(*) FROM commits WHERE kind = 'evaluation'").fetchone()[0]
    db.close()
    assert done == 3  # nothing finished was lost
