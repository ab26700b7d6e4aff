"""A parallel turn whose actions fail ends as its first failing action (in declared
order) says: that error's own type, message and retry rule, never an exception group."""

from __future__ import annotations

from typing import Any

import pytest

import corral
from corral import Action, BenchmarkTaskMetadata, Final, RateLimited, ToolEffect, TrialStatus
from corral.testing import FakeEnvironment, Gate, ScriptedAgent

pytestmark = pytest.mark.anyio


def two_tools(session: corral.AgentSession) -> Any:
    if session.iteration == 0:
        return [Action("first", {}), Action("second", {})]
    return Final([step.effect.observation for step in session.steps])


def failing(errors: dict[str, BaseException], *, second_fails_first: bool = False) -> Any:
    """Each tool raises its error on its first call (and echoes afterwards). The tools
    meet at a gate, so both are running when they fail; with ``second_fails_first``
    the second raises at once and only then lets the first go on to raise."""
    gate, arrived, calls = Gate(), [], {name: 0 for name in errors}

    async def effect(action: Action, session: corral.AgentSession) -> ToolEffect:
        calls[action.tool] += 1
        if calls[action.tool] > 1:
            return ToolEffect(action.tool)
        arrived.append(action.tool)
        if second_fails_first:
            if action.tool == "second":
                gate.open()
                raise errors["second"]
        elif len(arrived) == len(errors):
            gate.open()
        await gate.wait()
        raise errors[action.tool]

    return effect


async def run(effect: Any, max_retries: int) -> corral.TrialRecord:
    runner = corral.CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(two_tools)},
        {"e": FakeEnvironment(effect=effect)},
        store=corral.MemoryStore(),
        max_retries=max_retries,
        backoff_base=0,  # a retry at once: nothing here waits on time
    )
    report = await runner.run("b")
    return report.tasks["t"].trials[0]


async def test_two_tools_rate_limited_together_defer_the_trial() -> None:
    errors = {n: RateLimited(f"{n} slow down", retry_after=0) for n in ("first", "second")}
    trial = await run(failing(errors), max_retries=0)
    assert trial.status == TrialStatus.COMPLETED and trial.attempts == 1
    assert trial.output == ["first", "second"]


async def test_two_type_errors_together_are_one_type_error() -> None:
    errors = {n: TypeError(f"{n} called wrongly") for n in ("first", "second")}
    trial = await run(failing(errors), max_retries=0)
    assert trial.status == TrialStatus.ERROR and trial.attempts == 1
    assert trial.error == "TypeError: first called wrongly"


async def test_the_first_declared_failing_action_names_the_error_whichever_failed_first() -> None:
    errors = {n: RuntimeError(f"{n} broke") for n in ("first", "second")}
    trial = await run(failing(errors, second_fails_first=True), max_retries=0)
    assert trial.status == TrialStatus.ERROR and trial.error == "RuntimeError: first broke"


async def test_what_the_other_actions_did_is_recorded_and_not_repeated_by_the_retry() -> None:
    gate, calls = Gate(), {"first": 0, "second": 0}

    async def effect(action: Action, session: corral.AgentSession) -> ToolEffect:
        calls[action.tool] += 1
        if action.tool == "first" and calls["first"] == 1:
            gate.open()  # the second goes on only once the first has failed
            raise RuntimeError("first broke")
        if action.tool == "second":
            await gate.wait()
        return ToolEffect(action.tool)

    trial = await run(effect, max_retries=1)
    assert trial.status == TrialStatus.COMPLETED and trial.attempts == 2
    assert trial.output == ["first", "second"] and calls == {"first": 2, "second": 1}
