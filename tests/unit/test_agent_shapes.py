"""What may serve as an agent or environment: an instance whose methods give
awaitables, in any of Python's shapes of one (a partial, a decorated method, a callable
object, a scorer, a class whose methods need no instance). None is refused."""

from __future__ import annotations

import functools
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


AGENTS: dict[str, Any] = {
    "decorated": Decorated(),
    "callable": WithCallable(),
    "partial": WithPartial(),
    "static": StaticAgent,
    "class": ClassAgent,
}
ENVIRONMENTS: dict[str, Any] = {
    "scored": ScoredEnvironment(),
    "combined": CombinedEnvironment(),
    "decorated": PlainEvaluate(),
}


async def test_every_shape_of_an_async_method_runs(tmp_path: Path) -> None:
    tasks = {
        f"{a}-{e}": BenchmarkTaskMetadata(a, e, target="4") for a in AGENTS for e in ENVIRONMENTS
    }
    runner = CorralRunner(tasks, AGENTS, ENVIRONMENTS, store=tmp_path / "s.db", max_retries=0)
    report = await runner.run("b")
    failed = {t: r.trials[0].error for t, r in report.tasks.items() if not r.pass_at_k[1]}
    assert failed == {}
