"""Fake agents and environments whose every move a test scripts, gates and gauges."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Hashable, Iterable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, TypeVar

from .._types import Action, Evaluation, Final, ToolEffect, TrialRecord, TrialStatus
from ..runtime._session import AgentSession
from ._gate import Gate
from ._gauge import ConcurrencyGauge

T = TypeVar("T")
Decision = Action | Sequence[Action] | Final
#: A gate, a function choosing one (or none) from what is being done, or nothing.
GateChoice = Gate | Callable[..., Gate | None] | None


async def _resolve(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


async def _pass(gate: GateChoice, *args: Any) -> None:
    chosen = gate(*args) if callable(gate) else gate
    if chosen is not None:
        await chosen.wait()


def _held(gauge: ConcurrencyGauge | None, keys: Iterable[Hashable]) -> AbstractContextManager[None]:
    return nullcontext() if gauge is None else gauge.hold(*keys)


def default_agent_keys(session: AgentSession) -> tuple[Hashable, ...]:
    """``"act"``, ``("model", model)`` and ``("task", task_id)``."""
    return ("act", ("model", session.model), ("task", session.task_id))


class ScriptedAgent:
    """An agent whose every turn is ``decide(session)`` (a plain or async function).

    Each `act` call holds ``gauge`` under ``keys(session)`` (by default
    `default_agent_keys`) for its whole duration, and first waits on ``gate``: a
    `Gate`, or a function of the session that returns one or None. ``calls``
    counts `act` calls. Like any agent it keeps no per-trial state on itself.
    """

    def __init__(
        self,
        decide: Callable[[AgentSession], Decision | Awaitable[Decision]] = lambda _: Final(None),
        *,
        gate: GateChoice = None,
        gauge: ConcurrencyGauge | None = None,
        keys: Callable[[AgentSession], Iterable[Hashable]] = default_agent_keys,
    ) -> None:
        self.decide = decide
        self.gate = gate
        self.gauge = gauge
        self.keys = keys
        self.calls = 0

    def __repr__(self) -> str:
        return f"<ScriptedAgent calls={self.calls}>"

    async def act(self, session: AgentSession) -> Decision:
        self.calls += 1
        with _held(self.gauge, self.keys(session)):
            await _pass(self.gate, session)
            return await _resolve(self.decide(session))


@dataclass(frozen=True, slots=True)
class Execution:
    """One call of `FakeEnvironment.execute`, as it was asked."""

    task_id: str
    trial: int
    attempt: int
    action: Action
    step_key: str | None


def echo(action: Action, session: AgentSession) -> ToolEffect:
    """The default effect: observe the tool and arguments, leave the state unchanged."""
    return ToolEffect({"tool": action.tool, "arguments": dict(action.arguments)})


def passed_if_completed(trial: TrialRecord) -> Evaluation:
    """The default score: 1 and passed for a completed trial, else 0."""
    passed = trial.status == TrialStatus.COMPLETED
    return Evaluation(1.0 if passed else 0.0, passed)


class FakeEnvironment:
    """An environment for tests.

    - `setup` returns ``state``, or ``state(session)`` if it is callable (plain or
      async).
    - `execute` waits on ``execute_gate`` (a `Gate` or a function of the action
      and session), then returns ``effect(action, session)`` (plain or async;
      default `echo`); every call is appended to ``executions`` with its
      ``step_key`` before it waits.
    - `evaluate` waits on ``evaluate_gate`` (a `Gate` or a function of the
      trial record), then returns ``evaluate(trial)`` (default
      `passed_if_completed`); every record scored is appended to ``evaluated``.
    - ``execution_gauge`` and ``evaluation_gauge`` hold the key ``name`` for
      the whole of each call, so one gauge shared by several environments
      counts each environment name.
    """

    def __init__(
        self,
        name: str | None = None,
        *,
        state: Any = None,
        effect: Callable[[Action, AgentSession], ToolEffect | Awaitable[ToolEffect]] = echo,
        evaluate: Callable[[TrialRecord], Evaluation | Awaitable[Evaluation]] = passed_if_completed,
        execute_gate: GateChoice = None,
        evaluate_gate: GateChoice = None,
        execution_gauge: ConcurrencyGauge | None = None,
        evaluation_gauge: ConcurrencyGauge | None = None,
    ) -> None:
        self.name = name
        self.state = state
        self.effect = effect
        self.score = evaluate
        self.execute_gate = execute_gate
        self.evaluate_gate = evaluate_gate
        self.execution_gauge = execution_gauge
        self.evaluation_gauge = evaluation_gauge
        self.setups = 0
        self.executions: list[Execution] = []
        self.evaluated: list[TrialRecord] = []

    def __repr__(self) -> str:
        return (
            f"<FakeEnvironment {self.name!r} setups={self.setups} "
            f"executions={len(self.executions)} evaluated={len(self.evaluated)}>"
        )

    async def setup(self, session: AgentSession) -> Any:
        self.setups += 1
        return await _resolve(self.state(session)) if callable(self.state) else self.state

    async def execute(self, action: Action, session: AgentSession) -> ToolEffect:
        self.executions.append(
            Execution(session.task_id, session.trial, session.attempt, action, session.step_key)
        )
        with _held(self.execution_gauge, [self.name]):
            await _pass(self.execute_gate, action, session)
            return await _resolve(self.effect(action, session))

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        self.evaluated.append(trial)
        with _held(self.evaluation_gauge, [self.name]):
            await _pass(self.evaluate_gate, trial)
            return await _resolve(self.score(trial))
