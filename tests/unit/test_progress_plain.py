"""Progress without a terminal: plain lines a CI log can show, flushed as they come."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result
from rich.console import Console

import corral
from corral.cli import main
from corral.progress import PlainProgress, ProgressDisplay
from corral.testing import FakeEnvironment, wait_all_tasks_blocked

from ..support.child_lines import Lines

# The first trial waits for a line on stdin: the test reads the child's progress
# while the run is parked, then lets it go on.
GATED = textwrap.dedent(
    """
    import sys
    import anyio
    import corral
    from corral import BenchmarkTaskMetadata as Meta, Final
    from corral.testing import FakeEnvironment

    class Agent:
        async def act(self, session):
            if session.task_id == "t0" and session.trial == 0:
                await anyio.to_thread.run_sync(sys.stdin.readline)
            return Final(session.trial % 2 == 0)

    class Env(FakeEnvironment):
        async def evaluate(self, trial):
            return corral.Evaluation(1.0, bool(trial.output))

    benchmark = corral.Benchmark(
        tasks={f"t{i}": Meta("a", "e") for i in range(2)},
        agents={"a": Agent()},
        environments={"e": Env()},
        run_defaults={"max_parallel": 1, "trials_per_task": 2},
    )
    """
)


@pytest.mark.slow  # starts a process: a system test
def test_run_to_a_pipe_prints_plain_progress_while_it_runs(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(GATED)
    command = [sys.executable, "-m", "corral", "run", str(bench), "--store", tmp_path / "s.db"]
    child = subprocess.Popen(
        [str(c) for c in command],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "CORRAL_PROGRESS_INTERVAL": "0.05"},
    )
    assert child.stdin is not None and child.stdout is not None
    lines = Lines(child.stdout)
    try:
        start = lines.until("corral bench: ")
        assert "4 trials" in start and "max_parallel 1" in start
        # The run is parked in its first trial: the periodic line still arrives.
        waiting = lines.until("corral bench +")
        assert "0/4 trials" in waiting and "running 1" in waiting and "ETA" in waiting
        child.stdin.write("go\n")
        child.stdin.close()
        assert child.wait(timeout=60) == 0, child.stderr.read() if child.stderr else ""
        rest = lines.rest()
    finally:
        child.kill()
    assert "4/4 trials" in rest and "pass@1 so far 0.50 (2/4)" in rest
    assert "completed 4" in rest  # the summary follows the progress
    assert "\x1b[" not in "".join(lines.seen) + rest  # no escape codes in a log


class Stream(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushed: list[str] = []

    def flush(self) -> None:
        super().flush()
        self.flushed.append(self.getvalue())


class GatedAgent:
    """Trial ``i`` (in start order) waits for ``gates[i]``."""

    def __init__(self, n: int) -> None:
        self.gates = [anyio.Event() for _ in range(n)]
        self.started = [anyio.Event() for _ in range(n)]
        self._next = 0

    async def act(self, session: corral.AgentSession) -> corral.Final:
        i, self._next = self._next, self._next + 1
        self.started[i].set()
        await self.gates[i].wait()
        return corral.Final(i % 2 == 0)


def _env() -> FakeEnvironment:
    return FakeEnvironment(evaluate=lambda trial: corral.Evaluation(1.0, bool(trial.output)))


@pytest.mark.anyio
async def test_plain_progress_prints_each_period_and_each_tenth_flushed() -> None:
    now = 0.0
    stream = Stream()
    progress = PlainProgress(stream, interval=10.0, clock=lambda: now)
    n = 20
    agent = GatedAgent(n)
    tasks = {f"t{i}": corral.BenchmarkTaskMetadata("a", "e") for i in range(n)}
    runner = corral.CorralRunner(tasks, {"a": agent}, {"e": _env()}, store=corral.MemoryStore())

    async def run() -> None:
        await runner.run("p", max_parallel=1, observers=[progress])

    def lines() -> list[str]:
        return stream.getvalue().splitlines()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await wait_all_tasks_blocked()  # parked in the first trial
        assert len(lines()) == 1 and lines()[0].startswith("corral p: 20 trials")
        # One trial is 5 %: no line yet (neither a tenth done nor a period passed).
        agent.gates[0].set()
        await wait_all_tasks_blocked()
        assert len(lines()) == 1
        # The second makes a tenth.
        agent.gates[1].set()
        await wait_all_tasks_blocked()
        assert len(lines()) == 2 and "2/20 trials (10%)" in lines()[1]
        assert "pass@1 so far 0.50 (1/2)" in lines()[1] and "errors 0" in lines()[1]
        agent.gates[2].set()
        await wait_all_tasks_blocked()
        assert len(lines()) == 2
        # A period later, the next commit brings a line although no tenth is done.
        now = 10.0
        agent.gates[3].set()
        await wait_all_tasks_blocked()
        assert "3/20 trials (15%)" in lines()[2]
        assert "0.3 trials/s" in lines()[2] and "ETA 57 s" in lines()[2]
        assert "4/20 trials (20%)" in lines()[3] and len(lines()) == 4
        for gate in agent.gates[4:]:
            gate.set()
    last = lines()[-1]
    assert "20/20 trials (100%)" in last and "this run 10.0 s" in last
    assert sum("20/20 trials" in line for line in lines()) == 1  # the end line says it once
    assert all(line.count("\n") == 0 for line in lines())
    # Each line is flushed as soon as it is written.
    assert [f.count("\n") for f in stream.flushed if f][: len(lines())] == list(
        range(1, len(lines()) + 1)
    )


@pytest.mark.anyio
async def test_plain_progress_writes_a_line_each_period_while_no_commit_arrives() -> None:
    now = 0.0
    written: list[str] = []
    second = anyio.Event()

    class Watched(PlainProgress):
        def write(self, line: str) -> None:
            written.append(line)
            if len(written) == 2:
                second.set()

    progress = Watched(io.StringIO(), interval=10.0, clock=lambda: now, tick=0.001)
    agent = GatedAgent(1)
    tasks = {"t": corral.BenchmarkTaskMetadata("a", "e")}
    runner = corral.CorralRunner(tasks, {"a": agent}, {"e": _env()}, store=corral.MemoryStore())
    async with progress.refreshing(), anyio.create_task_group() as tg:
        tg.start_soon(lambda: runner.run("p", observers=[progress]))
        await agent.started[0].wait()
        assert len(written) == 1
        now = 10.0  # the run is parked in its trial: only the timer can write
        await second.wait()
        assert "0/1 trials" in written[1] and "running 1" in written[1]
        agent.gates[0].set()
    assert "1/1 trials" in written[-1]


@pytest.mark.anyio
async def test_progress_says_100_percent_only_once_every_trial_is_done() -> None:
    """199 of 200 trials done is 99.5%: both views rounded it to "(100%)" while a trial
    still ran; the share is rounded down, so 100% means done."""
    release = anyio.Event()

    class Agent:
        async def act(self, session: corral.AgentSession) -> corral.Final:
            if session.task_id == "t0":
                await release.wait()
            return corral.Final(True)

    tasks = {f"t{i}": corral.BenchmarkTaskMetadata("a", "e") for i in range(200)}
    runner = corral.CorralRunner(tasks, {"a": Agent()}, {"e": _env()}, store=corral.MemoryStore())
    stream = Stream()
    plain = PlainProgress(stream, interval=0.0)
    display = ProgressDisplay(Console(file=io.StringIO(), width=200))
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: runner.run("p", observers=[plain, display]))
        await wait_all_tasks_blocked()  # every trial but t0's is done
        console = Console(file=io.StringIO(), width=200, record=True)
        console.print(display.renderable())
        frame = console.export_text()
        release.set()
    assert "199/200 trials (99%)" in frame, frame
    lines = stream.getvalue().splitlines()
    assert any("199/200 trials (99%)" in line for line in lines), lines
    assert [line for line in lines if "(100%)" in line] == [lines[-1]]
    assert "200/200 trials (100%)" in lines[-1]


def _cli(*args: Any, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(
        main, [str(a) for a in args], input="go\n", env=env, catch_exceptions=False
    )


@pytest.mark.slow  # the whole demo (84 trials): a system test
def test_demo_shows_plain_progress_when_stdout_is_not_a_terminal(tmp_path: Path) -> None:
    out = _cli("demo", "--fast", "--store", tmp_path / "s.db").output
    assert re.search(r"^corral demo-\S+: \d+ trials · max_parallel", out, re.M), out
    assert re.search(r"^corral demo-\S+ \+[\d.]+ s: (\d+)/\1 trials \(100%\)", out, re.M), out


@pytest.mark.parametrize(
    "env",
    [{"CI": "true"}, {"FORCE_COLOR": "1"}, {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "0"}],
    ids=str,
)
def test_run_in_a_ci_log_prints_plain_lines_even_with_colours_forced(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """CI sets FORCE_COLOR (or rich's TTY_COMPATIBLE=1 with TTY_INTERACTIVE=0) for
    coloured logs: that asks for colour, not a live display, whose redraws (cursor
    moves, several times a second) would flood a log that is no terminal."""
    bench = tmp_path / "bench.py"
    bench.write_text(GATED)
    out = _cli("run", bench, "--store", tmp_path / "s.db", env=env).stdout
    assert re.search(r"^corral bench \+[\d.]+ s: 4/4 trials \(100%\)", out, re.M), out
    assert "\x1b[?25l" not in out and "\x1b[1A" not in out, repr(out[:300])


@pytest.mark.parametrize(
    "env", [{"FORCE_COLOR": "1", "TTY_INTERACTIVE": "1"}, {"TTY_COMPATIBLE": "1"}], ids=str
)
def test_run_draws_the_live_display_where_it_is_asked_for(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """rich's ``TTY_INTERACTIVE=1`` asks for its animations by name (``FORCE_COLOR`` alone
    only for colour), and ``TTY_COMPATIBLE=1`` says the output acts as a terminal: the
    live display is drawn there, though it is no terminal."""
    bench = tmp_path / "bench.py"
    bench.write_text(GATED)
    out = _cli("run", bench, "--store", tmp_path / "s.db", env=env).stdout
    assert "\x1b[?25l" in out and not re.search(r"^corral bench \+[\d.]+ s:", out, re.M), out


@pytest.mark.parametrize("quiet", [("--progress", "none"), ("--no-progress",), ("--json",)])
def test_progress_none_or_json_prints_no_progress(tmp_path: Path, quiet: tuple[str, ...]) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(GATED)
    out = _cli("run", bench, "--store", tmp_path / "s.db", *quiet).stdout
    assert not re.search(r"\d/\d+ trials \(", out) and "completed" in out


def test_plain_progress_beside_json_goes_to_stderr(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(GATED)
    result = _cli("run", bench, "--store", tmp_path / "s.db", "--json", "--progress", "plain")
    assert json.loads(result.stdout)["counts"]["completed"] == 4
    assert "4/4 trials (100%)" in result.stderr


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {"CORRAL_PROGRESS_INTERVAL": "soon"}, "CORRAL_PROGRESS_INTERVAL='soon'"),
        ((), {"CORRAL_PROGRESS_INTERVAL": "0"}, "CORRAL_PROGRESS_INTERVAL='0'"),
        (("--no-progress", "--progress", "rich"), {}, "--no-progress contradicts --progress"),
        (("--progress", "fancy"), {}, "'fancy' is not one of"),
    ],
)
def test_bad_progress_settings_are_refused_before_anything_runs(
    tmp_path: Path, args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(GATED)
    result = _cli("run", bench, "--store", tmp_path / "s.db", *args, env=env)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert not (tmp_path / "s.db").exists()
