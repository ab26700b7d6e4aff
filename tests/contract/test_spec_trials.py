"""SPEC section 3, Trials, as an outside user reads it: each test checks one promise
of 3.2 or 3.3 with the public names only, across a cancelled run and its resumption."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import corral
from corral import AgentSession, BenchmarkTaskMetadata, Evaluation, Final, TrialRecord
from corral.testing import FakeEnvironment, Gate, ScriptedAgent, wait_all_tasks_blocked

pytestmark = pytest.mark.anyio

TASKS = {"t": BenchmarkTaskMetadata("a", "e")}


def scored(log: list[tuple[str, int]]) -> FakeEnvironment:
    """An environment whose evaluation names its trial (and logs it): trial r passes when
    r is even."""

    def evaluate(trial: TrialRecord) -> Evaluation:
        log.append(("evaluate", trial.trial))
        return Evaluation(float(trial.trial), trial.trial % 2 == 0, {"trial": trial.trial})

    return FakeEnvironment(evaluate=evaluate)


def runner(agent: Any, env: FakeEnvironment, store: corral.CommitStore, **kw: Any) -> Any:
    return corral.CorralRunner(TASKS, {"a": agent}, {"e": env}, store=store, **kw)


async def test_a_resumed_overlapping_trial_sees_the_previous_trial_chosen_at_its_start() -> None:
    """3.3: trial 2 first starts when only trial 0 has been evaluated; cancelled, and
    resumed after trial 1 has been evaluated, it still sees trial 0's evaluation."""
    store, log = corral.MemoryStore(), []
    held = Gate()  # never opened: trials 1 and 2 stay unfinished in the first run
    seen: dict[tuple[int, int], Any] = {}

    def first(session: AgentSession) -> Final:
        seen[0, session.trial] = session.previous_evaluation
        return Final(session.trial)

    agent = ScriptedAgent(first, gate=lambda s: None if s.trial == 0 else held)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: runner(agent, scored(log), store).run(
                    "b", trials_per_task=3, max_parallel_per_task=2, max_parallel_total=2
                )
            )
            await wait_all_tasks_blocked()
            assert held.waiting == 2 and log == [("evaluate", 0)]  # trials 1 and 2 wait
            scope.cancel()

    def second(session: AgentSession) -> Final:
        log.append(("act", session.trial))
        seen[1, session.trial] = session.previous_evaluation
        return Final(session.trial)

    # One slot for everything: trial 1 runs and is scored before trial 2 goes on.
    await runner(ScriptedAgent(second), scored(log), store).run(
        "b", trials_per_task=3, max_parallel=1, max_parallel_per_task=2, max_parallel_total=1
    )
    assert log[1:] == [("act", 1), ("evaluate", 1), ("act", 2), ("evaluate", 2)]
    assert seen[1, 2] == Evaluation(0.0, True, {"trial": 0})


async def test_limits_k_values_retries_and_timeouts_may_change_when_a_run_resumes() -> None:
    """3.2: a cancelled run resumed with other limits, k values, retries and timeouts is
    the same benchmark (not refused): it reports what an uninterrupted run does."""
    store, log = corral.MemoryStore(), []
    held = Gate()
    agent = ScriptedAgent(lambda s: Final(s.trial), gate=lambda s: held if s.trial >= 2 else None)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: runner(agent, scored(log), store).run("b", trials_per_task=4))
            await wait_all_tasks_blocked()
            assert held.waiting == 1
            scope.cancel()
    resumed = await runner(
        ScriptedAgent(lambda s: Final(s.trial)), scored([]), store, max_retries=0, trial_timeout=60
    ).run(
        "b",
        trials_per_task=4,
        k_values=(1, 2, 4),
        max_parallel=3,
        max_parallel_per_task=4,
        max_parallel_evaluations=1,
    )
    reference = await runner(
        ScriptedAgent(lambda s: Final(s.trial)), scored([]), corral.MemoryStore()
    ).run("b", trials_per_task=4, k_values=(1, 2, 4))
    assert resumed.resumed == 2
    assert resumed.pass_at_k == reference.pass_at_k == {1: 0.5, 2: 5 / 6, 4: 1.0}
    assert [t.evaluation for t in resumed.tasks["t"].trials] == [
        t.evaluation for t in reference.tasks["t"].trials
    ]


async def histories(store: corral.CommitStore, benchmark_id: str, trials: int) -> dict[Any, Any]:
    """Every trial's commits of ``benchmark_id``: (task, trial) -> [(seq, kind, payload)]."""
    found = {}
    for task_id in ("t", "u"):
        for r in range(trials):
            key = corral.TrialKey(benchmark_id, task_id, r)
            found[task_id, r] = [(c.seq, c.kind, c.payload) for c in await store.history(key)]
    return found


async def test_reruns_rescores_and_new_ids_only_append_to_what_is_recorded() -> None:
    """3.2 and 4: history is never deleted. After a rerun of the failed trials, a rescore
    and a run of a new benchmark id (other trials per task) on the same store, every
    trial's earlier history is a prefix of its history now; the report counts the
    latest attempt and evaluation, and the new id started afresh."""
    store = corral.MemoryStore()
    tasks = {"t": BenchmarkTaskMetadata("a", "e"), "u": BenchmarkTaskMetadata("a", "e")}

    def flaky(session: AgentSession) -> Final:
        if session.task_id == "u" and session.trial == 1 and first_round:
            raise RuntimeError("the model was down")
        return Final(session.trial)

    def make(passed: bool, agent: ScriptedAgent) -> corral.CorralRunner:
        env = FakeEnvironment(evaluate=lambda t: Evaluation(float(passed), passed))
        return corral.CorralRunner(tasks, {"a": agent}, {"e": env}, store=store, max_retries=0)

    first_round = True
    report = await make(False, ScriptedAgent(flaky)).run("b", trials_per_task=2)
    assert report.counts["error"] == 1
    before = await histories(store, "b", 2)
    first_round = False
    rerun = await make(False, ScriptedAgent(flaky)).run("b", trials_per_task=2, rerun=("error",))
    assert rerun.counts["error"] == 0 and rerun.tasks["u"].trials[1].output == 1
    rescored = await make(True, ScriptedAgent(flaky)).rescore("b", k_values=(1, 2))
    assert rescored.pass_at_k == {1: 1.0, 2: 1.0}
    fresh = ScriptedAgent(flaky)
    other = await make(True, fresh).run("c", trials_per_task=3)
    assert fresh.calls == 6 and other.resumed == 0 and other.pass_at_k == {1: 1.0}
    after = await histories(store, "b", 2)
    for key, commits in before.items():
        assert after[key][: len(commits)] == commits, key
        assert after[key][-1][1:] == ("evaluation", {"score": 1.0, "passed": True, "details": {}})
    assert [kind for _, kind, _ in after["u", 1]][len(before["u", 1]) :] == [
        "reopen",
        "setup",
        "terminal",
        "evaluation",  # the rerun's
        "evaluation",  # the rescore's
    ]
