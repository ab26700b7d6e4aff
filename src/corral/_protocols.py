"""What Corral asks of agents, environments and observers (structural types), and
the checks that refuse, by name, an object that cannot be one."""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._errors import ConfigError
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


def check_observers(name: str, observers: object) -> tuple[Observer, ...]:
    """``observers`` as a tuple, or a `ConfigError` naming ``name`` and what is wrong:
    not a collection (``observers=display`` for ``[display]``), a class where an instance
    belongs, or an object with no ``on_commit`` (it would fail at the first commit and
    be dropped, telling nothing)."""
    if isinstance(observers, str | bytes | Mapping) or not isinstance(observers, Iterable):
        raise ConfigError(f"{name} must be a list of observers, not {observers!r}")
    given = tuple(observers)
    for observer in given:
        if isinstance(observer, type) and _is_instance_method(observer, "on_commit"):
            raise ConfigError(
                f"{name} holds the class {observer.__name__}: "
                f"pass an instance, {observer.__name__}()"
            )
        if not callable(getattr(observer, "on_commit", None)):
            raise ConfigError(f"{name} holds {observer!r}, which has no on_commit(key, commit)")
    return given


def _is_instance_method(cls: type, method: str) -> bool:
    """Whether ``cls.method`` needs an instance (a static or class method does not)."""
    try:
        found = inspect.getattr_static(cls, method)
    except AttributeError:
        return False
    return not isinstance(found, staticmethod | classmethod)
