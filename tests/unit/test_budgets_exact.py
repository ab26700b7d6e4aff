"""Budgets and the run's cost limit hold exactly: a spend not yet durable holds the next
trial back (SQLite), and usage a failed or deferred attempt left counts before asking again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

import corral
from corral import Action, AgentSession, Evaluation, Final, RetryPolicy, TrialRecord
from corral import BenchmarkTaskMetadata as Meta
from corral.testing import FakeEnvironment, LaggingStore, ScriptedAgent, wait_all_tasks_blocked

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> Any:
    return "asyncio"


def passed(trial: TrialRecord) -> Evaluation:
    return Evaluation(1.0, True)


class Spender:
    """Each turn records ``cost``; one tool call, then Final (whose turn costs too)."""

    def __init__(self, cost: float) -> None:
        self.cost = cost
        self.started: list[str] = []

    async def act(self, session: AgentSession) -> Action | Final:
        if session.iteration == 0:
            self.started.append(session.task_id)
        session.record_usage(cost=self.cost)
        if session.iteration < 1:
            return Action("step", {})
        return Final("done")


async def test_run_cost_limit_stops_admission_exactly_on_a_sqlite_store(tmp_path: Path) -> None:
    tasks = {f"t{i}": Meta("a", "e") for i in range(4)}
    agent = Spender(0.5)
    run = corral.CorralRunner(
        tasks,
        {"a": agent},
        {"e": FakeEnvironment(evaluate=passed)},
        store=str(tmp_path / "s.db"),
        retry_policy=RetryPolicy(max_retries=0),
    )
    report = await run.run("b", max_parallel=1, run_cost_limit=2)
    # Each trial costs 1 and runs alone: the second reaches 2, nothing starts after it
    # (as on a MemoryStore, test_budgets.py).
    assert agent.started == ["t0", "t1"]
    assert report.finished == 2


@pytest.mark.parametrize(
    "failure",
    [
        pytest.param(RuntimeError("flaky after the model call"), id="failed attempt"),
        pytest.param(corral.RateLimited("429 after a billed call", retry_after=0), id="deferral"),
    ],
)
async def test_a_budget_overrun_before_a_failure_is_not_asked_again(
    failure: Exception,
) -> None:
    """The usage a failed attempt (retried) or a rate limit's deferral carried counts
    against the budget before the agent is asked anything again: a trial already over
    its token budget ends ``limit``, with that usage."""
    calls: list[int] = []

    class Overspends:
        async def act(self, session: AgentSession) -> Action | Final:
            calls.append(session.attempt)
            session.record_usage(input_tokens=150)  # a model call, then the failure
            if len(calls) == 1:
                raise failure
            return Final("done")

    run = corral.CorralRunner(
        {"t": Meta("a", "e")},
        {"a": Overspends()},
        {"e": FakeEnvironment(evaluate=passed)},
        store=corral.MemoryStore(),
        retry_policy=RetryPolicy(max_retries=2, backoff_base=0),
    )
    report = await run.run("b", token_limit=100)
    [trial] = report.tasks["t"].trials
    assert calls == [0]  # 150 tokens of a budget of 100 were spent: no second call
    assert (trial.status, trial.limit, trial.usage.input_tokens) == ("limit", "token_limit", 150)


class OneByOne(LaggingStore):
    """A lagging store a test makes durable one append at a time, oldest first."""

    def release_one(self) -> None:
        self._held.pop(0).release()


async def test_run_cost_limit_holds_while_the_store_lags_past_its_backlog() -> None:
    """A worker whose store lags past ``max_backlog`` waits only for half of it to land
    before its result frees its slot: the trial's own costly terminal may still wait.
    Its spend must be counted before anything starts on the strength of that slot."""
    started: list[str] = []

    def decide(session: AgentSession) -> Final:
        started.append(session.task_id)
        session.record_usage(cost=1.0)
        return Final("done")

    store = OneByOne()
    run = corral.CorralRunner(
        {f"t{i}": Meta("a", "e") for i in range(4)},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment(evaluate=passed)},
        store=store,
        retry_policy=RetryPolicy(max_retries=0),
        max_backlog=2,
    )
    report: list[corral.BenchmarkReport] = []

    async def go() -> None:
        report.append(await run.run("b", max_parallel=2, run_cost_limit=2))

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        while not report:
            await wait_all_tasks_blocked()
            if store.held:
                store.release_one()
    # t0 and t1 start together and spend 2 between them: nothing starts after them
    # (before: their slots were freed with t1's terminal not yet counted, so t2 and
    # t3 started too).
    assert started == ["t0", "t1"]
    assert report[0].stopped is not None and report[0].stopped.startswith("run_cost_limit")
