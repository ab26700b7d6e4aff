"""The live progress display: what it shows, how often it draws, and that it never
stops a run."""

from __future__ import annotations

import io
from typing import Any

import anyio
import pytest
from rich.console import Console

import corral
from corral.progress import ProgressDisplay, Tally
from corral.testing import FakeEnvironment, LaggingStore, wait_all_tasks_blocked

pytestmark = pytest.mark.anyio


class GatedAgent:
    """Acts once per trial; holds every call until ``release`` is set."""

    def __init__(self, expected: int) -> None:
        self.started = 0
        self.expected = expected
        self.all_started = anyio.Event()
        self.release = anyio.Event()

    async def act(self, session: corral.AgentSession) -> corral.Action | corral.Final:
        if session.steps:
            return corral.Final(session.trial % 2 == 0)
        self.started += 1
        if self.started == self.expected:
            self.all_started.set()
        await self.release.wait()
        session.record_usage(input_tokens=10, output_tokens=2, cost=0.001)
        return corral.Action("noop")


class Env:
    name = "grader"

    async def setup(self, session: corral.AgentSession) -> Any:
        return {}

    async def execute(
        self, action: corral.Action, session: corral.AgentSession
    ) -> corral.ToolEffect:
        return corral.ToolEffect("ok")

    async def evaluate(self, trial: corral.TrialRecord) -> corral.Evaluation:
        return corral.Evaluation(1.0, bool(trial.output))


def _runner(agent: Any) -> corral.CorralRunner:
    tasks = {f"t{i}": corral.BenchmarkTaskMetadata("agent", "env", model="m") for i in range(4)}
    return corral.CorralRunner(tasks, {"agent": agent}, {"env": Env()}, store=corral.MemoryStore())


LIMITS: dict[str, Any] = {
    "trials_per_task": 2,
    "max_parallel": 3,
    "max_parallel_by_model": {"m": 2},
    "max_parallel_by_environment": {"env": 3},
    "max_parallel_evaluations_by_environment": {"grader": 1},
}


def _console() -> Console:
    return Console(file=io.StringIO(), force_terminal=True, width=120)


def _written(console: Console) -> str:
    assert isinstance(console.file, io.StringIO)
    return console.file.getvalue()


def _text(renderable: Any) -> str:
    console = Console(file=io.StringIO(), width=120)
    console.print(renderable)
    return _written(console)


async def test_display_shows_counts_and_utilisation_of_every_limit() -> None:
    agent = GatedAgent(expected=2)
    display = ProgressDisplay(_console())
    report: list[corral.BenchmarkReport] = []

    async def run() -> None:
        report.append(await _runner(agent).run("p", **LIMITS, observers=[display]))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await agent.all_started.wait()
        frame = _text(display.renderable())
        agent.release.set()
    assert "corral p" in frame
    assert "running 2" in frame and "queued 2" in frame and "done 0" in frame
    assert "0/8 trials" in frame
    for row in (
        "executions ",
        "evaluations ",
        "executions + evaluations",
        "model m",
        "environment env",
        "evaluations in grader",
    ):
        assert row in frame, row
    assert "2/2" in frame  # model m is saturated
    assert "2/3" in frame  # two of three executions

    final = _text(display.renderable())
    assert report[0].counts["completed"] == 8
    assert "8/8 trials" in final and "done 8" in final
    assert "pass@1 so far 0.50 (4/8)" in final
    assert "errors 0" in final and "tokens 80 in / 16 out" in final
    assert display.error is None
    # The live area was drawn to the terminal console, with escape codes.
    drawn = _written(display.console)
    assert "\x1b[" in drawn and "8/8 trials" in drawn


async def test_display_draws_at_most_once_per_interval() -> None:
    drawn = 0

    class Counting(ProgressDisplay):
        def renderable(self) -> Any:
            nonlocal drawn
            drawn += 1
            return super().renderable()

    agent = GatedAgent(expected=0)
    agent.release.set()
    # A clock that never moves: only the first frame and the final one are drawn.
    display = Counting(_console(), clock=lambda: 100.0)
    report = await _runner(agent).run("p", **LIMITS, observers=[display])
    assert sum(report.counts.values()) == 8
    assert display.tally.commits > 8 * 4
    assert drawn == 2


async def test_a_display_that_fails_to_draw_never_stops_the_run() -> None:
    class Broken(ProgressDisplay):
        calls = 0

        def renderable(self) -> Any:
            self.calls += 1
            if self.calls == 3:
                raise RuntimeError("terminal exploded")
            return super().renderable()

    ticks = iter(range(10_000))
    agent = GatedAgent(expected=0)
    agent.release.set()
    display = Broken(_console(), clock=lambda: float(next(ticks)))  # every commit is due
    report = await _runner(agent).run("p", **LIMITS, observers=[display])
    assert report.counts["completed"] == 8
    assert isinstance(display.error, RuntimeError)
    assert display.calls == 3  # turned off after the failure: no more drawing


async def test_a_display_that_fails_at_start_never_stops_the_run() -> None:
    class Broken(ProgressDisplay):
        def renderable(self) -> Any:
            raise ValueError("no")

    agent = GatedAgent(expected=0)
    agent.release.set()
    display = Broken(_console())
    report = await _runner(agent).run("p", **LIMITS, observers=[display])
    assert report.counts["completed"] == 8
    assert isinstance(display.error, ValueError)


async def test_refreshing_redraws_while_no_commit_arrives() -> None:
    now = 0.0
    redrawn = anyio.Event()

    class Watched(ProgressDisplay):
        def renderable(self) -> Any:
            if now >= 5.0:
                redrawn.set()
            return super().renderable()

    agent = GatedAgent(expected=1)
    display = Watched(_console(), refresh_per_second=1000, clock=lambda: now)
    async with display.refreshing():
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: _runner(agent).run(
                    "p", trials_per_task=1, max_parallel=1, observers=[display]
                )
            )
            await agent.all_started.wait()
            # The run is parked inside the agent: no commit arrives, yet time moves on.
            now = 5.0
            await redrawn.wait()
            assert "5.0 s" in _text(display.renderable())
            agent.release.set()
    assert display.error is None


def test_tally_counts_passes_errors_and_unscored_trials() -> None:
    tally = Tally()

    def commit(kind: str, payload: Any, usage: corral.Usage | None = None) -> corral.Commit:
        return corral.Commit(0, kind, payload, 0.0, usage or corral.Usage())

    tally.add(commit("action", {"tool": "x"}, corral.Usage(5, 1, 0.5)))
    tally.add(commit("terminal", {"status": "completed", "attempts": 2}))
    tally.add(commit("evaluation", {"score": 1.0, "passed": True, "details": {}}))
    tally.add(commit("terminal", {"status": "completed", "attempts": 1}))
    tally.add(commit("evaluation", {"error": "ValueError: x", "attempts": 3}))
    tally.add(commit("terminal", {"status": "error", "attempts": 3}))
    tally.add(commit("terminal", {"status": "unreachable", "attempts": 0}))
    assert tally.finished == 4
    assert tally.passed == 1
    assert tally.pass_rate == 0.25
    assert tally.errors == 2  # one trial error, one failed evaluation
    assert tally.retried == 3  # failed attempts given another: 1 + 2, as the report counts
    assert (tally.input_tokens, tally.output_tokens, tally.cost) == (5, 1, 0.5)
    assert Tally().pass_rate is None


def test_utilisation_shows_effective_model_limits_and_scopes() -> None:
    from corral._concurrency import SUBPROCESSES
    from corral.progress._view import utilisation

    limits = corral.Limits.resolve(max_parallel=8, max_parallel_by_model={"big": 4})
    stats = corral.Statistics(
        executing=3,
        evaluating=0,
        ready=5,
        awaiting_evaluation=0,
        finished=0,
        total=20,
        by_model={"big": 1, "free": 2},
        by_environment={},
        evaluations_by_environment={},
        effective_by_model={"big": 2, "free": 3},
        deferred=2,
    )
    scopes = {
        "api": corral.ScopeStatistics("api", limit=10, in_use=4, waiting=1, peak=10),
        SUBPROCESSES: corral.ScopeStatistics(SUBPROCESSES, limit=2, in_use=2, waiting=0, peak=2),
    }
    rows = utilisation(stats, limits, scopes)
    assert ("model big (rate-limited: 2 of 4)", 1, 2) in rows
    assert ("model free (rate-limited)", 2, 3) in rows
    assert ("scope api (1 waiting)", 4, 10) in rows
    assert ("subprocesses", 2, 2) in rows


async def test_display_leaves_this_runs_own_time_when_the_live_area_closes() -> None:
    now = 0.0
    agent = GatedAgent(expected=2)
    console = Console(file=io.StringIO(), width=120)  # not a terminal: only what stays
    display = ProgressDisplay(console, clock=lambda: now)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: _runner(agent).run("p", **LIMITS, observers=[display]))
        await agent.all_started.wait()
        now = 5.0
        agent.release.set()
    assert _written(console).strip() == "corral p: this run 8 trials in 5.0 s"


async def test_done_counts_and_the_eta_wait_for_the_store_to_acknowledge() -> None:
    """The display is fed by durable commits: trials the store has not acknowledged
    (a second Ctrl-C would lose them) are not done. It read the scheduler's count
    instead: 4/4 (100%) and "ETA 0 s" while nothing was durable."""
    tasks = {f"t{i}": corral.BenchmarkTaskMetadata("a", "e") for i in range(4)}
    store = LaggingStore()
    env = FakeEnvironment(evaluate=lambda trial: corral.Evaluation(1.0, True))

    class Answers:  # no action: nothing waits for the store
        async def act(self, session: corral.AgentSession) -> corral.Final:
            return corral.Final(True)

    runner = corral.CorralRunner(tasks, {"a": Answers()}, {"e": env}, store=store)
    display = ProgressDisplay(_console())
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: runner.run("p", observers=[display]))
        await wait_all_tasks_blocked()  # every trial ended; none of it is durable
        assert store.held and display.tally.commits == 0
        frame = _text(display.renderable())
        snapshot = display.snapshot()
        store.release()
    assert "0/4 trials (0%)" in frame and "done 0" in frame, frame
    assert snapshot is not None and snapshot.eta is None  # nothing known yet
    assert "4/4 trials (100%)" in _text(display.renderable())
