"""What may serve as an agent or environment: an instance whose methods give
awaitables, in any of Python's shapes of one (a partial, a decorated method, a callable
object, a scorer, a class whose methods need no instance, a plain function returning
another's coroutine). None is refused."""

from __future__ import annotations

import functools
import types
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from corral import (
    Action,
    AgentSession,
    BenchmarkTaskMetadata,
    CorralRunner,
    Evaluation,
    Final,
    ToolEffect,
    TrialRecord,
    scorers,
)

pytestmark = pytest.mark.anyio


async def _finish(session: AgentSession, answer: str = "4") -> Final:
    return Final(answer)


def _passed_through(function: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A decorator whose wrapper is a plain function that returns the coroutine."""

    @functools.wraps(function)
    def wrapper(*args: Any) -> Awaitable[Any]:
        return function(*args)

    return wrapper


class Decorated:
    @_passed_through
    async def act(self, session: AgentSession) -> Final:
        return Final("4")


class CallableAct:
    async def __call__(self, session: AgentSession) -> Final:
        return Final("4")


class WithCallable:
    act = CallableAct()


class WithPartial:
    def __init__(self) -> None:
        self.act = functools.partial(_finish, answer="4")


class StaticAgent:  # the class itself serves: act needs no instance
    @staticmethod
    async def act(session: AgentSession) -> Final:
        return Final("4")


class ClassAgent:
    @classmethod
    async def act(cls, session: AgentSession) -> Final:
        return Final("4")


class ScoredEnvironment:
    """``evaluate`` is a scorer (a callable object), ``execute`` a partial."""

    evaluate = scorers.exact()

    def __init__(self) -> None:
        self.execute = functools.partial(self._execute, unused=None)

    async def setup(self, session: AgentSession) -> None:
        return None

    async def _execute(self, action: Action, session: AgentSession, unused: None) -> ToolEffect:
        return ToolEffect(None)


class CombinedEnvironment(ScoredEnvironment):
    evaluate = scorers.combine(scorers.exact(), scorers.includes())


class PlainEvaluate(ScoredEnvironment):
    @_passed_through
    async def evaluate(self, trial: TrialRecord) -> Evaluation:  # type: ignore[override]
        return Evaluation(1.0, trial.output == "4")


def _unwrapped(function: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """A decorator that keeps no trace of what it wraps (no functools.wraps)."""

    def wrapper(*args: Any) -> Awaitable[Any]:
        return function(*args)

    return wrapper


class Delegating:
    """A wrapper agent: its plain ``act`` returns the coroutine of the agent it wraps."""

    def __init__(self) -> None:
        self.inner = Decorated()

    def act(self, session: AgentSession) -> Awaitable[Final]:
        return self.inner.act(session)


class UnwrappedDecorator:
    @_unwrapped
    async def act(self, session: AgentSession) -> Final:
        return Final("4")


class Forwarder:
    """A callable object whose plain ``__call__`` returns a coroutine."""

    def __call__(self, session: AgentSession) -> Awaitable[Final]:
        return _finish(session)


class WithForwarder:
    act = Forwarder()


class GeneratorCoroutine:
    @types.coroutine
    def act(self, session: AgentSession) -> Any:
        yield from ()
        return Final("4")


class LambdaEnvironment(ScoredEnvironment):
    """``setup`` and ``evaluate`` are lambdas returning another's coroutine."""

    def __init__(self) -> None:
        super().__init__()
        scorer = scorers.exact()
        self.setup = lambda session: ScoredEnvironment.setup(self, session)
        self.evaluate = lambda trial: scorer(trial)


AGENTS: dict[str, Any] = {
    "decorated": Decorated(),
    "callable": WithCallable(),
    "partial": WithPartial(),
    "static": StaticAgent,
    "class": ClassAgent,
    "delegating": Delegating(),
    "unwrapped": UnwrappedDecorator(),
    "forwarder": WithForwarder(),
    "generator coroutine": GeneratorCoroutine(),
}
ENVIRONMENTS: dict[str, Any] = {
    "scored": ScoredEnvironment(),
    "combined": CombinedEnvironment(),
    "decorated": PlainEvaluate(),
    "lambdas": LambdaEnvironment(),
}


async def test_every_shape_of_an_async_method_runs(tmp_path: Path) -> None:
    tasks = {
        f"{a}-{e}": BenchmarkTaskMetadata(a, e, target="4") for a in AGENTS for e in ENVIRONMENTS
    }
    runner = CorralRunner(tasks, AGENTS, ENVIRONMENTS, store=tmp_path / "s.db", max_retries=0)
    report = await runner.run("b")
    failed = {t: r.trials[0].error for t, r in report.tasks.items() if not r.pass_at_k[1]}
    assert failed == {}
