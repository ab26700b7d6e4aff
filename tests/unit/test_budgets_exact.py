"""Budgets and the run's cost limit hold exactly: a spend not yet durable holds the next
trial back (SQLite), and usage a failed or deferred attempt left counts before asking again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import corral
from corral import Action, AgentSession, Evaluation, Final, RetryPolicy, TrialRecord
from corral import BenchmarkTaskMetadata as Meta
from corral.testing import FakeEnvironment

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
