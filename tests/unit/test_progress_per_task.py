"""``max_parallel_per_task`` (default 1: a task's trials run one after another) said
where it bites: in the live display, the plain lines, the summary and ``--help``."""

from __future__ import annotations

import io
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from rich.console import Console

import corral
from corral.cli import main
from corral.progress import PlainProgress, ProgressDisplay, per_task_note
from corral.progress._plain import progress_line
from corral.testing import FakeEnvironment, wait_all_tasks_blocked

Meta = corral.BenchmarkTaskMetadata


class GatedAgent:
    """Every trial waits for ``release``."""

    def __init__(self) -> None:
        self.release = anyio.Event()

    async def act(self, session: corral.AgentSession) -> corral.Final:
        await self.release.wait()
        return corral.Final(session.trial)


def _text(renderable: Any) -> str:
    console = Console(file=io.StringIO(), width=200)
    console.print(renderable)
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


async def _run_parked(tasks: dict[str, Meta], **limits: Any) -> tuple[ProgressDisplay, str, str]:
    """Run until every runnable trial is parked; return both views and what they show."""
    agent = GatedAgent()
    runner = corral.CorralRunner(
        tasks, {"a": agent}, {"e": FakeEnvironment()}, store=corral.MemoryStore()
    )
    display = ProgressDisplay(Console(file=io.StringIO()))
    plain = PlainProgress(io.StringIO())
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: runner.run("b", observers=[display, plain], **limits))
        await wait_all_tasks_blocked()
        frame = _text(display.renderable())
        snapshot = plain.snapshot()
        assert snapshot is not None
        line = progress_line(snapshot)
        agent.release.set()
    return display, frame, line


@pytest.mark.anyio
async def test_the_per_task_limit_is_named_where_it_holds_trials_back() -> None:
    display, frame, line = await _run_parked(
        {"apples": Meta("a", "e")}, trials_per_task=4, max_parallel=8
    )
    for shown in (frame, line):
        assert (
            "held by max_parallel_per_task 1: 3 trials wait for their task's earlier trials"
            in shown
        )
    snapshot = display.snapshot()
    assert snapshot is not None
    stats = snapshot.statistics
    assert stats.held_by_task == 0 and stats.task_limit_waits == 3
    assert stats.task_limit_tasks == ("apples",)
    note = per_task_note(stats, snapshot.limits)
    assert note is not None
    assert "trials of apples waited 3 times" in note and "one after another" in note
    assert "--max-parallel-per-task" in note


@pytest.mark.anyio
async def test_no_per_task_note_when_the_run_was_full_anyway() -> None:
    # One slot for four tasks: max_parallel binds, not the per-task limit.
    tasks = {f"t{i}": Meta("a", "e") for i in range(4)}
    display, frame, line = await _run_parked(tasks, trials_per_task=2, max_parallel=1)
    assert "max_parallel_per_task" not in line and "earlier trials" not in frame
    assert "held by max_parallel 1/1" in line
    snapshot = display.snapshot()
    assert snapshot is not None
    assert snapshot.statistics.task_limit_waits == 0
    assert per_task_note(snapshot.statistics, snapshot.limits) is None


@pytest.mark.anyio
async def test_overlapping_trials_are_held_by_a_higher_per_task_limit_too() -> None:
    display, frame, line = await _run_parked(
        {"apples": Meta("a", "e")}, trials_per_task=5, max_parallel=8, max_parallel_per_task=2
    )
    assert "held by max_parallel_per_task 2: 3 trials wait" in line
    snapshot = display.snapshot()
    assert snapshot is not None
    note = per_task_note(snapshot.statistics, snapshot.limits)
    assert note is not None and "max_parallel_per_task is 2" in note


BENCH = textwrap.dedent(
    """
    import corral
    from corral.testing import FakeEnvironment

    class Agent:
        async def act(self, session):
            return corral.Final(session.trial)

    benchmark = corral.Benchmark(
        {"apples": corral.BenchmarkTaskMetadata("a", "e"),
         "pears": corral.BenchmarkTaskMetadata("a", "e")},
        {"a": Agent()},
        {"e": FakeEnvironment()},
        run_defaults={"trials_per_task": 4},
    )
    """
)


def test_the_summary_says_when_the_per_task_limit_serialised_trials(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH)
    args = ["run", str(bench), "--store", str(tmp_path / "s.db"), "--task", "apples"]
    out = CliRunner().invoke(main, [*args, "--max-parallel", "8", "--progress", "none"]).output
    assert "trials of apples waited 3 times" in out and "one after another" in out, out
    assert "--max-parallel-per-task" in out
    again = CliRunner().invoke(
        main, [*args, "--benchmark-id", "b2", "--max-parallel-per-task", "4", "--no-progress"]
    )
    assert "one after another" not in again.output


def test_help_shows_the_defaults_of_the_limits() -> None:
    out = CliRunner().invoke(main, ["run", "--help"], terminal_width=200).output
    flat = " ".join(out.split())
    assert "--max-parallel INTEGER Running trial executions (default 4)" in flat, flat
    assert "Running executions of one task (default 1" in flat
    assert "(default: --max-parallel)" in flat
