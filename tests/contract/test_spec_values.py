"""SPEC section 1, Values: a value a commit cannot record fails its attempt, "and is
retried like any exception"; section 3.2: "a trial attempt that raises is retried up
to max_retries times". Written with the public names only."""

from __future__ import annotations

from typing import Any

import pytest

import corral
from corral import (
    Action,
    AgentSession,
    BenchmarkTaskMetadata,
    Evaluation,
    Final,
    ToolEffect,
    TrialRecord,
)

pytestmark = pytest.mark.anyio


class FlakyOnce:
    """Fails its first attempt (``failure(session)``), then answers ``Final("ok")``."""

    def __init__(self, failure: Any) -> None:
        self.failure = failure

    async def act(self, session: AgentSession) -> Any:
        if session.attempt == 0:
            return self.failure()
        return Final("ok")


class Env:
    async def setup(self, session: AgentSession) -> Any:
        return 0

    async def execute(self, action: Action, session: AgentSession) -> ToolEffect:
        return ToolEffect("done")

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return Evaluation(1.0, trial.output == "ok")


def _raise_type_error() -> Any:
    raise TypeError("act() got an unexpected keyword argument")


@pytest.mark.parametrize(
    "failure",
    [lambda: Final({1, 2}), lambda: Final(object()), _raise_type_error],
    ids=["set-output", "object-output", "TypeError"],
)
async def test_a_failed_attempt_is_retried_like_any_exception(failure: Any) -> None:
    tasks = {"t": BenchmarkTaskMetadata("a", "e")}
    runner = corral.CorralRunner(
        tasks,
        {"a": FlakyOnce(failure)},
        {"e": Env()},
        store=corral.MemoryStore(),
        max_retries=1,
        backoff_base=0,
    )
    [trial] = (await runner.run("b")).tasks["t"].trials
    assert (trial.status, trial.attempts, trial.output) == ("completed", 2, "ok")
    assert trial.evaluation is not None and trial.evaluation.passed


class Always:
    """Answers ``decision`` every turn."""

    def __init__(self, decision: Any) -> None:
        self.decision = decision

    async def act(self, session: AgentSession) -> Any:
        return self.decision


class Counting(Env):
    """`Env` that counts what it is asked to execute."""

    def __init__(self) -> None:
        self.executed: list[Action] = []

    async def execute(self, action: Action, session: AgentSession) -> ToolEffect:
        self.executed.append(action)
        return ToolEffect("done")


@pytest.mark.parametrize(
    ("action", "named"),
    [
        (Action(7, {}), "tool 7 of Action(tool=7, arguments={})"),  # type: ignore[arg-type]
        (Action("x", [1]), "arguments [1] of Action(tool='x', arguments=[1])"),  # type: ignore[arg-type]
        (Action("x", None), "arguments None of Action(tool='x', arguments=None)"),  # type: ignore[arg-type]
    ],
)
async def test_an_action_that_is_not_a_tool_name_and_mapping_is_refused(
    action: Action, named: str
) -> None:
    """SPEC 1: ``Action(tool: str, arguments: Mapping[str, Any])``. Anything else fails
    the attempt naming it, before it is recorded or reaches the environment."""
    env = Counting()
    runner = corral.CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": Always(action)},
        {"e": env},
        store=corral.MemoryStore(),
        max_retries=0,
    )
    [trial] = (await runner.run("b")).tasks["t"].trials
    assert trial.status == "error" and env.executed == []
    assert trial.error is not None and named in trial.error
    assert trial.commits == 2  # setup and terminal: no action recorded
