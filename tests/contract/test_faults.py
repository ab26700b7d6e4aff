"""Faults at every commit point: retried in the run, or a crash and a resumed run.

Either way the run finishes with the report of an uninterrupted run, the agent
is asked once per recorded turn, and every action keeps its step key.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest
from bench.durable_bench import Log, comparable, runner

import corral
from corral import Commit, RetryPolicy, TrialKey
from corral.testing import FaultStore

TASKS = 4
TRIALS = 2
TARGET = TrialKey("b", "task-001", 1)


class Fault(Exception):
    """A transient failure at a commit point: the attempt is retried."""


class Crash(BaseException):
    """The process dying at a commit point: the run stops and is run again."""


# (commit kind, which one of that kind for the target trial, fail after it landed?)
POINTS = {
    "after the action commit": ("action", 1, True),
    "before the tool-effect commit": ("tool_effect", 1, False),
    "inside a parallel turn": ("tool_effect", 3, True),
    "before a parallel turn's first tool effect": ("tool_effect", 2, False),
    "before the terminal commit": ("terminal", 1, False),
    "after the terminal commit": ("terminal", 1, True),
    "before the evaluation commit": ("evaluation", 1, False),
}

NO_WAIT = RetryPolicy(max_retries=3, backoff_base=0)


async def reference() -> dict[str, Any]:
    report = await runner(corral.MemoryStore(), Log(None), TASKS).run(
        "b", trials_per_task=TRIALS, k_values=(1, 2)
    )
    return comparable(report)


def check_log(log: Log, store: corral.MemoryStore, *, asked_twice_allowed: int = 0) -> None:
    lines = log.read()
    asks = Counter((x["task"], x["trial"], x["turn"]) for x in lines if x["kind"] == "act")
    repeated = [k for k, n in asks.items() if n > 1]
    assert len(repeated) <= asked_twice_allowed, repeated
    keys: set[str] = set()
    for key, history in store._histories.items():
        actions = [c for c in history if c.kind == "action"]
        keys.update(c.payload["step_key"] for c in actions)
        assert [c.seq for c in history] == list(range(len(history))), key
        assert sum(c.kind == "evaluation" for c in history) == 1, key
    executed = [x["key"] for x in lines if x["kind"] == "execute"]
    assert set(executed) == keys  # every action executed, under its recorded key only


@pytest.mark.anyio
@pytest.mark.parametrize("point", list(POINTS))
async def test_transient_fault_is_retried_in_the_run(point: str) -> None:
    kind, nth, after = POINTS[point]
    memory = corral.MemoryStore()
    store = FaultStore(memory, kind=kind, key=TARGET, nth=nth, after=after, error=Fault(point))
    log = Log(None)
    report = await runner(store, log, TASKS, retry_policy=NO_WAIT).run(
        "b", trials_per_task=TRIALS, k_values=(1, 2)
    )
    assert store.fired
    assert comparable(report) == await reference()
    # A Final that never reached the store was never recorded: it is asked for again.
    check_log(log, memory, asked_twice_allowed=int(kind == "terminal" and not after))
    executions = Counter(x["key"] for x in log.read() if x["kind"] == "execute")
    if kind == "tool_effect" and not after:
        assert max(executions.values()) == 2  # re-executed once, same key
    target = report.tasks[TARGET.task_id].trials[TARGET.trial]
    # The failed attempt is counted, unless its terminal commit had already landed: a
    # tool effect is not waited for on its own, so a lost acknowledgement of the last
    # one surfaces only when the terminal commit after it has landed too.
    landed_anyway = after and (kind == "terminal" or point == "inside a parallel turn")
    assert target.attempts == (1 if landed_anyway or kind == "evaluation" else 2)


@pytest.mark.anyio
@pytest.mark.parametrize("point", list(POINTS))
async def test_crash_then_resume_equals_uninterrupted(point: str) -> None:
    kind, nth, after = POINTS[point]
    memory = corral.MemoryStore()
    log = Log(None)
    store = FaultStore(memory, kind=kind, key=TARGET, nth=nth, after=after, error=Crash(point))
    with pytest.raises(BaseException) as info:
        await runner(store, log, TASKS, retry_policy=NO_WAIT).run(
            "b", trials_per_task=TRIALS, k_values=(1, 2), max_parallel=2
        )
    assert (
        info.group_contains(Crash)
        if isinstance(info.value, BaseExceptionGroup)
        else isinstance(info.value, Crash)
    )
    report = await runner(memory, log, TASKS, retry_policy=NO_WAIT).run(
        "b", trials_per_task=TRIALS, k_values=(1, 2), max_parallel=2
    )
    assert report.resumed > 0 or kind == "action"
    assert comparable(report) == await reference()
    # A crash may interrupt a decision that was not yet recorded (one per running trial).
    check_log(log, memory, asked_twice_allowed=2)
    if kind == "action" and after:
        asks = Counter((x["task"], x["trial"], x["turn"]) for x in log.read() if x["kind"] == "act")
        assert asks[(TARGET.task_id, TARGET.trial, 0)] == 1  # proposed, so never asked again


@pytest.mark.anyio
async def test_cancelled_run_resumes_to_the_same_report() -> None:
    memory = corral.MemoryStore()
    log = Log(None)
    gate = anyio.Event()
    seen: list[Commit] = []

    class CancelAfter:
        def __init__(self, scope: anyio.CancelScope) -> None:
            self.scope = scope

        def on_commit(self, key: TrialKey, commit: Commit) -> None:
            seen.append(commit)
            if len(seen) == 25:
                self.scope.cancel()
                gate.set()

    with anyio.CancelScope() as scope:
        await runner(memory, log, TASKS).run(
            "b", trials_per_task=TRIALS, k_values=(1, 2), observers=[CancelAfter(scope)]
        )
    assert scope.cancelled_caught and gate.is_set()
    total = sum(len(h) for h in memory._histories.values())
    assert 25 <= total < TASKS * TRIALS * 7
    report = await runner(memory, log, TASKS).run("b", trials_per_task=TRIALS, k_values=(1, 2))
    assert comparable(report) == await reference()
    check_log(log, memory, asked_twice_allowed=4)


@pytest.mark.anyio
async def test_a_fault_before_a_parallel_effect_leaves_no_gap_in_an_sqlite_store(
    tmp_path: Any,
) -> None:
    """The other action of the turn ends after the refused append: its effect must not
    land past the sequence number that append took (the store would read as corrupt)."""
    sqlite = corral.SQLiteStore(tmp_path / "store.db")
    store = FaultStore(sqlite, kind="tool_effect", key=TARGET, nth=2, error=Fault("refused"))
    report = await runner(store, Log(None), TASKS, retry_policy=NO_WAIT).run(
        "b", trials_per_task=TRIALS, k_values=(1, 2)
    )
    assert store.fired
    assert comparable(report) == await reference()
    assert report.tasks[TARGET.task_id].trials[TARGET.trial].attempts == 2


@pytest.mark.anyio
async def test_second_runner_on_the_same_benchmark_is_refused(tmp_path: Any) -> None:
    path = tmp_path / "store.db"
    log = Log(None)
    entered = anyio.Event()
    release = anyio.Event()

    class Holding:
        def on_run_start(self, info: corral.RunInfo) -> None:
            entered.set()

        def on_commit(self, key: TrialKey, commit: Commit) -> None:
            pass

    class SlowEnvironment:
        async def setup(self, session: corral.AgentSession) -> int:
            await release.wait()
            return 0

        async def execute(self, action: corral.Action, session: corral.AgentSession) -> Any:
            return corral.ToolEffect(0, 0)

        async def evaluate(self, trial: corral.TrialRecord) -> corral.Evaluation:
            return corral.Evaluation(1.0, True)

    first = runner(path, log, 1)
    first.environments = {"arith": SlowEnvironment()}
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: first.run("b", observers=[Holding()]))
        await entered.wait()
        with pytest.raises(corral.BenchmarkBusyError, match="'b'"):
            await runner(path, log, 1).run("b")
        # Another benchmark id in the same store is not blocked.
        await runner(path, log, 1).run("other")
        release.set()
    report = await runner(path, log, 1).run("b")  # the claim went with its holder
    assert report.resumed == 1
