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
