"""What Corral asks of agents, environments and observers (structural types)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._types import Action, Commit, Evaluation, Final, ToolEffect, TrialKey, TrialRecord

if TYPE_CHECKING:
    from .runtime._session import AgentSession


@runtime_checkable
class Agent(Protocol):
    """Decides the next turn. One instance serves every trial at once: keep
    per-trial scratch in ``session.scratch`` or locals, never on ``self``.

    An optional ``run_context(info)`` returns an async context manager that the
    runner enters around each run (a model client's connection pool, say).
    """

    async def act(self, session: AgentSession) -> Action | Sequence[Action] | Final: ...


@runtime_checkable
class Environment(Protocol):
    """Sets a trial up, carries out its actions, and scores it.

    An optional ``name`` attribute keys ``max_parallel_evaluations_by_environment``.
    An optional ``tools`` attribute (a sequence of `corral.Tool`) or method
    ``tools(session)`` declares what it executes: agents see them in
    ``session.tools``, and a call of another tool, or with arguments its schema
    refuses, gets an error observation without reaching ``execute``. An
    optional ``run_context(info)`` is entered around each run, as for agents.
    """

    async def setup(self, session: AgentSession) -> Any: ...

    async def execute(self, action: Action, session: AgentSession) -> ToolEffect: ...

    async def evaluate(self, trial: TrialRecord) -> Evaluation: ...


class Observer(Protocol):
    """Told of every commit once it is durable. An observer that raises is
    reported and dropped; it never stops the run or rolls anything back."""

    def on_commit(self, key: TrialKey, commit: Commit) -> None: ...
