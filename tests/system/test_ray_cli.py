"""Ray as a user meets it: `corral run --executor ray` (or a script) in a process of its
own that starts (and stops) its own local Ray; Ray's own output stays out of the
terminal."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytest.importorskip("ray")

BENCHMARK = textwrap.dedent(
    """
    import corral
    from corral import BenchmarkTaskMetadata as Meta, Final
    from corral.testing import FakeEnvironment

    class Agent:
        async def act(self, session):
            async with corral.concurrency("api", 1):  # the run's scope hub: a detached actor
                return Final(session.task_id)

    benchmark = corral.Benchmark(
        tasks={f"t{i}": Meta("a", "e") for i in range(2)},
        agents={"a": Agent()},
        environments={"e": FakeEnvironment()},
    )
    """
)

#: Inherited by every process the command starts, Ray's included: how to find them.
MARK = "CORRAL_TEST_MARK"


def left_behind(mark: str) -> list[str]:
    """Processes (``pid name``) that inherited ``mark``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:  # gone, or not ours
            continue
        if f"{MARK}={mark}".encode() in environ.split(b"\0"):
            found.append(f"{pid} {name}")
    return found


def command(tmp_path: Path, *extra: str) -> list[str]:
    bench = tmp_path / "bench.py"
    bench.write_text(BENCHMARK)
    store = str(tmp_path / "store.db")
    return [sys.executable, "-m", "corral", "run", str(bench), "--store", store, *extra]


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_ray_logs_to_a_file_and_the_ray_it_started_is_gone_when_it_exits(
    tmp_path: Path,
) -> None:
    mark = uuid.uuid4().hex
    done = subprocess.run(
        command(tmp_path, "--executor", "ray", "--no-progress", "-v"),
        capture_output=True,
        text=True,
        env={**os.environ, MARK: mark},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert left_behind(mark) == []
    shown = done.stdout + done.stderr
    assert "\x1b[" not in shown
    assert not re.search(r"\b(WARNING|INFO)\b", shown), shown
    found = re.search(r"Ray's logs: (.+)", done.stderr)
    assert found is not None, done.stderr
    assert "Started a local Ray instance" in Path(found.group(1).strip()).read_text()


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc")
def test_ctrl_c_as_the_run_shuts_ray_down_exits_cleanly(tmp_path: Path) -> None:
    """The report is out and Ray is being shut down when Ctrl-C comes: Ray's shutdown,
    cut short, left its core worker half torn down and the interpreter crashed at exit."""
    mark = uuid.uuid4().hex
    child = subprocess.Popen(
        command(tmp_path, "--executor", "ray", "--no-progress"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, MARK: mark},
    )
    assert child.stdout is not None
    for line in child.stdout:
        if line.startswith("report"):  # the last line of the report: Ray's shutdown is next
            break
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=120)
    # 130: the interrupt was seen; -SIGINT: it came as the interpreter had finished.
    assert child.returncode in (0, 130, -signal.SIGINT), err
    assert "Traceback" not in err
    assert left_behind(mark) == []


@pytest.mark.parametrize(
    ("address", "named"),
    [
        ("bogus://x", "bogus"),  # no such Ray client module
        ("ray://127.0.0.1:1", "ray\\[client\\]|127.0.0.1:1"),  # Ray Client (not installed)
        ("127.0.0.1:1", "within 1 s"),  # nothing listens: Ray would retry for 13 minutes
    ],
)
def test_a_ray_address_that_cannot_be_joined_is_one_error_line(
    tmp_path: Path, address: str, named: str
) -> None:
    done = subprocess.run(
        command(tmp_path, "--executor", "ray", "--ray-address", address, "--ray-timeout", "1"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and address in line and re.search(named, line), line
    assert not (tmp_path / "store.db").exists()


def test_a_cluster_named_by_ray_address_is_joined_within_ray_timeout(tmp_path: Path) -> None:
    """Without --ray-address, Ray joins the cluster ``RAY_ADDRESS`` names: that join had
    no deadline (--ray-timeout ignored), and a cluster that was down hung the command
    for minutes while Ray's connection warnings filled the terminal."""
    done = subprocess.run(
        command(tmp_path, "--executor", "ray", "--ray-timeout", "1"),
        capture_output=True,
        text=True,
        env={**os.environ, "RAY_ADDRESS": "127.0.0.1:1"},
        timeout=90,
    )
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "127.0.0.1:1" in line and "RAY_ADDRESS" in line, line
    assert "within 1 s" in line, line
    assert not (tmp_path / "store.db").exists()


TWO_RUNS = textwrap.dedent(
    """
    import sys
    import anyio
    import corral

    sys.path.insert(0, sys.argv[2])
    import small

    b = small.benchmark
    executor = corral.RayExecutor()
    executor.pickle_by_value(small)  # the hosts cannot import it
    runner = corral.CorralRunner(b.tasks, b.agents, b.environments, store=sys.argv[1])
    for name in ("first", "second"):  # each on an event loop (and worker threads) of its own
        report = anyio.run(lambda: runner.run(name, executor=executor))
        print(name, report.counts["completed"], flush=True)
    executor.shutdown()
    """
)


def test_the_ray_one_run_started_serves_the_next(tmp_path: Path) -> None:
    """Ray was tied to the worker thread that started it (``PR_SET_PDEATHSIG``): when the
    first run's event loop closed, its threads ended and Ray's GCS and raylet died."""
    (tmp_path / "small.py").write_text(BENCHMARK)
    script = tmp_path / "two_runs.py"
    script.write_text(TWO_RUNS)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "store.db"), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert done.stdout.split("\n")[:2] == ["first 2", "second 2"], done.stderr[-2000:]
