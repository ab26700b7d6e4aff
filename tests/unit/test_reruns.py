"""Reruns: what a trial run again sees of the ones before it, and what the report
counts while reopened trials have not ended again."""

from __future__ import annotations

from typing import Any

import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral import Evaluation, Final, MemoryStore, TrialRecord
from corral.runtime import AgentSession
from corral.testing import FakeEnvironment

pytestmark = pytest.mark.anyio

NO_BACKOFF = corral.RetryPolicy(max_retries=0, backoff_base=0)


async def test_a_rerun_unreachable_childs_next_trial_sees_its_new_previous_evaluation() -> None:
    """A parent errored in both rounds, so its child's two (reflective) trials ended
    unreachable. After ``rerun=("error",)`` both rounds of the child run again; with
    max_parallel_per_task=1 the child's trial 1 must see trial 0's *new* evaluation
    as previous_evaluation (spec 3.3), not the stale unreachable record's None."""
    store = MemoryStore()
    broken = {True}
    seen: dict[tuple[str, int], Any] = {}

    class Agent:
        async def act(self, session: AgentSession) -> Final:
            if session.task_id == "p" and broken:
                raise RuntimeError("broken parent")
            seen[(session.task_id, session.trial)] = session.previous_evaluation
            return Final(session.trial)

    def evaluate(r: TrialRecord) -> Evaluation:
        return Evaluation(1.0, True, {"task": r.task_id, "trial": r.trial})

    tasks = {"p": Meta("a", "e"), "c": Meta("a", "e", dependencies=("p",))}

    def make() -> corral.CorralRunner:
        env = FakeEnvironment(evaluate=evaluate)
        return corral.CorralRunner(
            tasks, {"a": Agent()}, {"e": env}, store=store, retry_policy=NO_BACKOFF
        )

    first = await make().run("b", trials_per_task=2, k_values=(1,))
    assert [t.status for t in first.tasks["c"].trials] == ["unreachable", "unreachable"]

    broken.clear()
    again = await make().run("b", trials_per_task=2, k_values=(1,), rerun=("error",))
    assert [t.status for t in again.tasks["c"].trials] == ["completed", "completed"]
    assert seen[("c", 0)] is None
    assert seen[("c", 1)] == Evaluation(1.0, True, {"task": "c", "trial": 0})


class Flaky:
    """Raises on the trials in ``broken``; records a cost on every call."""

    def __init__(self, broken: set[int]) -> None:
        self.broken = broken
        self.asked: list[int] = []

    async def act(self, session: AgentSession) -> Final:
        self.asked.append(session.trial)
        session.record_usage(input_tokens=1, output_tokens=1, cost=1.0)
        if session.trial in self.broken:
            raise RuntimeError("broken agent")
        return Final(session.trial)


def _flaky_runner(agent: Flaky, store: corral.CommitStore) -> corral.CorralRunner:
    return corral.CorralRunner(
        {"t": Meta("a", "e")},
        {"a": agent},
        {"e": FakeEnvironment()},
        store=store,
        retry_policy=NO_BACKOFF,
    )


async def test_a_rerun_stopped_before_its_trials_ran_does_not_drop_their_failures() -> None:
    """A rerun whose run stops before the reopened trial runs (here: run_cost_limit
    already reached) must not make pass@k jump: the failed trial is still a failure
    until a new attempt ends, not silently left out (which picks the passing trials:
    the bias the README says reruns never introduce)."""
    store = MemoryStore()
    agent = Flaky({1})
    first = await _flaky_runner(agent, store).run("b", trials_per_task=3, k_values=(1, 3))
    assert [t.status for t in first.tasks["t"].trials] == ["completed", "error", "completed"]
    assert first.pass_at_k[1] == pytest.approx(2 / 3)

    agent.asked.clear()
    again = await _flaky_runner(agent, store).run(
        "b", trials_per_task=3, k_values=(1, 3), rerun=("error",), run_cost_limit=1.0
    )
    assert again.stopped is not None and agent.asked == []  # nothing ran
    # Nothing new is known: the figures are those of the run before.
    assert again.pass_at_k == first.pass_at_k
    assert again.tasks["t"].pass_at_k == first.tasks["t"].pass_at_k


async def test_a_child_left_unreachable_by_a_stopped_rerun_runs_once_its_parent_completed() -> None:
    """A rerun writes a trial's reopen marker only as the trial starts: a run stopped
    after a parent's rerun completed and before its unreachable child could start
    leaves the child's record standing; the next run, rerun or not, runs the child."""
    store = MemoryStore()
    broken = {True}
    asked: list[str] = []

    class Agent:
        async def act(self, session: AgentSession) -> Final:
            asked.append(session.task_id)
            if session.task_id == "p" and broken:
                raise RuntimeError("broken parent")
            session.record_usage(cost=1.0)
            return Final(session.task_id)

    tasks = {"p": Meta("a", "e"), "c": Meta("a", "e", dependencies=("p",))}

    def make() -> corral.CorralRunner:
        env = FakeEnvironment(evaluate=lambda r: Evaluation(1.0, True))
        return corral.CorralRunner(
            tasks, {"a": Agent()}, {"e": env}, store=store, retry_policy=NO_BACKOFF
        )

    first = await make().run("b", k_values=(1,))
    assert first.counts["unreachable"] == 1 and first.counts["error"] == 1
    broken.clear()
    asked.clear()
    stopped = await make().run("b", k_values=(1,), rerun=("error",), run_cost_limit=1.0)
    assert asked == ["p"] and stopped.stopped is not None
    assert stopped.counts["unreachable"] == 1  # the child's record stands, counted
    asked.clear()
    last = await make().run("b", k_values=(1,))
    assert asked == ["c"]
    assert last.counts["completed"] == 2 and last.pass_at_k[1] == 1.0
