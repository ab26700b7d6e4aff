"""The operator's loop: re-run failed trials, re-score, run a subset, stop on errors.

History is never deleted: every test checks what the store keeps, not only the report.
"""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

import corral
from corral import Action, Evaluation, Final, MemoryStore, TrialKey, TrialRecord, TrialStatus
from corral import BenchmarkTaskMetadata as Meta
from corral.runtime import AgentSession
from corral.testing import FakeEnvironment, LaggingStore, ScriptedAgent, wait_all_tasks_blocked

pytestmark = pytest.mark.anyio

NO_BACKOFF = corral.RetryPolicy(max_retries=0, backoff_base=0)


class Flaky:
    """An agent that raises on the trials in ``broken`` until it is fixed."""

    def __init__(self, broken: set[tuple[str, int]]) -> None:
        self.broken = broken
        self.asked: list[tuple[str, int]] = []

    async def act(self, session: AgentSession) -> Action | Final:
        self.asked.append((session.task_id, session.trial))
        session.record_usage(input_tokens=10, output_tokens=1, cost=0.125)
        if (session.task_id, session.trial) in self.broken:
            raise RuntimeError(f"broken agent on {session.task_id}")
        if not session.steps:
            return Action("echo", {"x": session.trial})
        return Final({"parent": dict(session.inputs), "trial": session.trial})


def make(agent: Any, store: corral.CommitStore, env: Any = None, **tasks: Meta) -> Any:
    tasks = tasks or {"t": Meta("a", "e")}
    return corral.CorralRunner(
        tasks, {"a": agent}, {"e": env or FakeEnvironment()}, store=store, retry_policy=NO_BACKOFF
    )


async def kinds(store: corral.CommitStore, task: str, trial: int) -> list[str]:
    return [c.kind for c in await store.history(TrialKey("b", task, trial))]


async def test_rerun_errors_gives_a_fresh_attempt_and_keeps_the_earlier_one() -> None:
    store = MemoryStore()
    agent = Flaky({("t", 1)})
    first = await make(agent, store).run("b", trials_per_task=3, k_values=(1, 3))
    assert [t.status for t in first.tasks["t"].trials] == ["completed", "error", "completed"]
    assert first.pass_at_k[1] == pytest.approx(2 / 3)

    agent.broken.clear()  # the agent is fixed
    agent.asked.clear()
    again = await make(agent, store).run("b", trials_per_task=3, k_values=(1, 3), rerun=("error",))
    assert agent.asked == [("t", 1), ("t", 1)]  # only the failed trial ran (two turns)
    assert [t.status for t in again.tasks["t"].trials] == ["completed"] * 3
    assert again.pass_at_k == {1: 1.0, 3: 1.0}
    assert again.resumed == 2
    history = await store.history(TrialKey("b", "t", 1))
    kinds_ = [c.kind for c in history]
    assert kinds_ == [
        "setup",
        "terminal",
        "reopen",
        "setup",
        "action",
        "tool_effect",
        "terminal",
        "evaluation",
    ]
    assert [c.seq for c in history] == list(range(len(history)))
    assert history[1].payload["status"] == "error"  # the earlier attempt is kept
    assert history[2].payload == {"reason": "rerun", "previous_status": "error"}
    # The report rebuilt from the store (as `corral report` does) agrees.
    [summary] = [s for s in await store.summaries("b") if s.trial == 1]
    assert summary.record().status == TrialStatus.COMPLETED and summary.commits == 6
    # Usage counts every attempt: tokens spent on the failed one were spent too.
    [trial] = [t for t in again.tasks["t"].trials if t.trial == 1]
    assert trial.usage == summary.usage == corral.Usage(30, 3, 0.375)

    agent.asked.clear()  # nothing errored now: another rerun changes nothing
    third = await make(agent, store).run("b", trials_per_task=3, k_values=(1, 3), rerun=("error",))
    assert agent.asked == [] and third.pass_at_k == again.pass_at_k


async def test_unreachable_descendants_of_a_rerun_trial_run_again() -> None:
    store = MemoryStore()
    agent = Flaky({("p", 0)})
    tasks = {
        "p": Meta("a", "e"),
        "c": Meta("a", "e", dependencies=("p",)),
        "g": Meta("a", "e", dependencies=("c",)),
    }
    first = await make(agent, store, **tasks).run("b")
    assert [first.tasks[t].trials[0].status for t in "pcg"] == ["error", *["unreachable"] * 2]

    agent.broken.clear()
    again = await make(agent, store, **tasks).run("b", rerun=["error"])
    assert [again.tasks[t].trials[0].status for t in "pcg"] == ["completed"] * 3
    assert again.tasks["c"].trials[0].output["parent"] == {"p": {"parent": {}, "trial": 0}}
    assert (await kinds(store, "g", 0))[:2] == ["terminal", "reopen"]


async def test_a_rerun_whose_parent_fails_again_is_unreachable_again() -> None:
    store = MemoryStore()
    agent = Flaky({("p", 0)})
    tasks = {"p": Meta("a", "e"), "c": Meta("a", "e", dependencies=("p",))}
    await make(agent, store, **tasks).run("b")
    again = await make(agent, store, **tasks).run("b", rerun=("error",))
    assert [again.tasks[t].trials[0].status for t in "pc"] == ["error", "unreachable"]
    assert await kinds(store, "c", 0) == ["terminal", "reopen", "terminal"]


@pytest.mark.parametrize(
    ("rerun", "message"),
    [
        (("completed",), "rerun names 'completed'"),
        ("error", "rerun must be a sequence"),
        (("nope",), "rerun names 'nope'"),
    ],
)
async def test_bad_rerun_is_refused_before_anything_is_written(rerun: Any, message: str) -> None:
    store = MemoryStore()
    with pytest.raises(corral.ConfigError, match=message):
        await make(ScriptedAgent(), store).run("b", rerun=rerun)
    assert await store.benchmarks() == []


async def test_rescore_appends_an_evaluation_and_the_report_uses_the_latest() -> None:
    store = MemoryStore()
    strict = FakeEnvironment(evaluate=lambda r: Evaluation(0.0, False))
    first = await make(ScriptedAgent(lambda s: Final(s.trial)), store, strict).run(
        "b", trials_per_task=2, k_values=(1,)
    )
    assert first.pass_at_k == {1: 0.0}

    lenient = FakeEnvironment(evaluate=lambda r: Evaluation(1.0, r.output == 1))
    agent = ScriptedAgent()
    report = await make(agent, store, lenient).rescore("b", k_values=(1, 2))
    assert agent.calls == 0  # nothing executes
    assert [t.passed for t in report.tasks["t"].trials] == [False, True]
    assert report.pass_at_k == {1: 0.5, 2: 1.0}
    assert await kinds(store, "t", 1) == ["setup", "terminal", "evaluation", "evaluation"]

    # --failed-only: only trials that did not pass are scored again.
    counting = FakeEnvironment(evaluate=lambda r: Evaluation(1.0, True))
    report = await make(agent, store, counting).rescore("b", failed_only=True)
    assert [r.trial for r in counting.evaluated] == [0]
    assert report.pass_at_k == {1: 1.0}
    # A later resume reuses the latest evaluations; nothing runs.
    unused = FakeEnvironment(evaluate=lambda r: Evaluation(0.0, False))
    resumed = await make(agent, store, unused).run("b", trials_per_task=2)
    assert resumed.pass_at_k == {1: 1.0} and agent.calls == 0 and unused.evaluated == []


async def test_rescore_a_subset_and_refusals() -> None:
    store = MemoryStore()
    tasks = {"x": Meta("a", "e"), "y": Meta("a", "e")}
    await make(ScriptedAgent(), store, **tasks).run("b")
    env = FakeEnvironment()
    report = await make(ScriptedAgent(), store, env, **tasks).rescore("b", task_ids=["y"])
    assert list(report.tasks) == ["y"] and [r.task_id for r in env.evaluated] == ["y"]
    with pytest.raises(corral.ConfigError, match="no task 'z'"):
        await make(ScriptedAgent(), store, **tasks).rescore("b", task_ids=["z"])
    with pytest.raises(corral.ConfigError, match="no benchmark 'nope'"):
        await make(ScriptedAgent(), store, **tasks).rescore("nope")


async def test_a_failed_scorer_is_rescored() -> None:
    store = MemoryStore()

    def crash(record: TrialRecord) -> Evaluation:
        raise RuntimeError("scorer bug")

    first = await make(ScriptedAgent(), store, FakeEnvironment(evaluate=crash)).run("b")
    [trial] = first.tasks["t"].trials
    assert trial.evaluation_error == "RuntimeError: scorer bug" and not trial.passed
    report = await make(ScriptedAgent(), store).rescore("b", failed_only=True)
    [trial] = report.tasks["t"].trials
    assert trial.passed and trial.evaluation_error is None and trial.error is None


async def test_a_subset_of_an_existing_benchmark_runs_without_being_refused() -> None:
    store = MemoryStore()
    tasks = {"x": Meta("a", "e"), "y": Meta("a", "e", dependencies=("x",)), "z": Meta("a", "e")}
    agent = ScriptedAgent()
    await make(agent, store, **tasks).run("b", trials_per_task=2)
    report = await make(agent, store, **tasks).run("b", task_ids=["y"], trials_per_task=2)
    assert sorted(report.tasks) == ["x", "y"] and report.resumed == 4 and agent.calls == 6
    # A subset that adds a task is a different benchmark; so is a changed task.
    await make(agent, store, **tasks).run("small", task_ids=["z"])
    with pytest.raises(corral.ConfigError, match="task 'x' was not in it"):
        await make(agent, store, **tasks).run("small", task_ids=["x"])
    changed = {**tasks, "z": Meta("a", "e", max_iterations=3)}
    with pytest.raises(corral.ConfigError, match="task 'z' max_iterations was 10, now 3"):
        await make(agent, store, **changed).run("b", task_ids=["z"], trials_per_task=2)


async def test_fail_on_error_stops_admission_and_stays_resumable() -> None:
    store = MemoryStore()
    agent = Flaky({("t", r) for r in range(10)})
    report = await make(agent, store).run(
        "b", trials_per_task=10, max_parallel_per_task=1, fail_on_error=2
    )
    # One trial runs at a time: the third error stops it; nothing else starts.
    assert [t.status for t in report.tasks["t"].trials] == ["error"] * 3
    assert report.stopped is not None and "3 errors exceeded the limit of 2" in report.stopped
    assert report.to_dict()["stopped"] == report.stopped
    agent.broken.clear()
    resumed = await make(agent, store).run("b", trials_per_task=10, rerun=("error",))
    assert resumed.counts["completed"] == 10 and resumed.stopped is None


async def test_fail_on_error_as_a_fraction_and_counting_failed_evaluations() -> None:
    store = MemoryStore()

    def crash(record: TrialRecord) -> Evaluation:
        raise RuntimeError("scorer bug")

    run = make(ScriptedAgent(), store, FakeEnvironment(evaluate=crash))
    report = await run.run("b", trials_per_task=10, fail_on_error=0.1)  # more than 1 of 10
    assert len(report.tasks["t"].trials) == 2 and report.stopped is not None


@pytest.mark.parametrize("bad", [-1, 1.5, 0.0, True, "3", float("nan")])
async def test_bad_fail_on_error_is_refused(bad: Any) -> None:
    with pytest.raises(corral.ConfigError, match="fail_on_error"):
        await make(ScriptedAgent(), MemoryStore()).run("b", fail_on_error=bad)


async def test_appends_waiting_for_a_lagging_store_are_bounded_by_max_backlog() -> None:
    # Past the bound, no worker takes new work; work already admitted still hands over
    # its appends: at most 3 a slot (setup, terminal, evaluation), 4 slots in total.
    assert await lagging_peak(8) <= 8 + 1 + 3 * 4
    assert await lagging_peak(0) > 100  # unbounded: 60 trials x 3 appends pile up


async def lagging_peak(bound: int) -> int:
    store = LaggingStore()
    tasks = {f"t{i}": Meta("a", "e") for i in range(60)}
    run = corral.CorralRunner(
        tasks, {"a": ScriptedAgent()}, {"e": FakeEnvironment()}, store=store, max_backlog=bound
    )
    report = None

    async def go() -> None:
        nonlocal report
        report = await run.run("b", max_parallel=2)

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        while report is None:
            await wait_all_tasks_blocked()  # the run has handed over all it can
            store.release()
            await anyio.lowlevel.checkpoint()
    assert report is not None and report.counts["completed"] == 60
    return store.peak
