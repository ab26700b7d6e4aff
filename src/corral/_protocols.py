"""What Corral asks of agents, environments and observers (structural types), and
the checks that refuse, by name, an object that cannot be one."""

from __future__ import annotations

import functools
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
    be dropped, telling nothing) or an async one (called without await, it would never
    run: a RuntimeWarning at each commit, most often unseen)."""
    if isinstance(observers, str | bytes | Mapping) or not isinstance(observers, Iterable):
        raise ConfigError(f"{name} must be a list of observers, not {observers!r}")
    given = tuple(observers)
    for observer in given:
        if isinstance(observer, type) and _is_instance_method(observer, "on_commit"):
            raise ConfigError(
                f"{name} holds the class {observer.__name__}: "
                f"pass an instance, {observer.__name__}()"
            )
        on_commit = getattr(observer, "on_commit", None)
        if not callable(on_commit):
            raise ConfigError(f"{name} holds {observer!r}, which has no on_commit(key, commit)")
        if inspect.iscoroutinefunction(on_commit) or inspect.isasyncgenfunction(on_commit):
            raise ConfigError(
                f"{name} holds {observer!r}, whose on_commit is async: it is called "
                "without await, so it must be a plain def"
            )
    return given


def check_agent(agent_id: str, agent: object) -> None:
    """A `ConfigError` naming ``agent_id`` unless ``agent`` can be asked to act: an
    instance (not its class) whose ``act`` gives an awaitable. Either mistake would
    otherwise fail every attempt of every trial with a TypeError."""
    _check_methods(f"agent {agent_id!r}", agent, ("act",))


def check_environment(env_id: str, env: object) -> None:
    """A `ConfigError` naming ``env_id`` unless ``env`` is an instance whose ``setup``,
    ``execute`` and ``evaluate`` give awaitables, and whose ``name``, if any, is text."""
    _check_methods(f"environment {env_id!r}", env, ("setup", "execute", "evaluate"))
    name = getattr(env, "name", None)
    if name is not None and not isinstance(name, str):
        # It keys max_parallel_evaluations_by_environment: a name of another type was
        # passed over for the id, and a cap on it ("3" for 3) refused as unknown.
        raise ConfigError(
            f"environment {env_id!r} has name {name!r}: a name must be a string or None"
        )


def _check_methods(what: str, obj: object, methods: tuple[str, ...]) -> None:
    for method in methods:
        if not callable(getattr(obj, method, None)):
            raise ConfigError(f"{what} has no {method}() method")
    if isinstance(obj, type) and any(_is_instance_method(obj, m) for m in methods):
        raise ConfigError(f"{what} is the class {obj.__name__}: pass an instance, {obj.__name__}()")
    for method in methods:
        if _is_generator(getattr(obj, method)):
            raise ConfigError(
                f"{what}'s {method} is a generator: it must be an async function "
                "(async def) that returns its result"
            )


def _is_instance_method(cls: type, method: str) -> bool:
    """Whether ``cls.method`` needs an instance (a static or class method does not)."""
    try:
        found = inspect.getattr_static(cls, method)
    except AttributeError:
        return False
    return not isinstance(found, staticmethod | classmethod)


def _is_generator(function: object) -> bool:
    """Whether calling ``function`` surely gives no awaitable but a generator: an async
    generator function, or a plain one that `types.coroutine` did not make a coroutine,
    after unwrapping partials, methods and callable objects (a scorer's ``__call__``).

    Nothing else can be told: a plain ``def`` may return another's coroutine (a wrapper
    agent's ``act`` returning its inner agent's, a lambda, a decorator without
    ``functools.wraps``), as may a builtin or a mock. It is taken; one that returns no
    awaitable fails its attempts with a TypeError saying so."""
    if inspect.iscoroutinefunction(function):  # partials and marked functions too
        return False
    if isinstance(function, functools.partial):
        return _is_generator(function.func)
    if inspect.ismethod(function):
        return _is_generator(function.__func__)
    if inspect.isfunction(function):  # judged by itself: a wrapper may return a coroutine
        return inspect.isasyncgenfunction(function) or (
            inspect.isgeneratorfunction(function)
            and not function.__code__.co_flags & inspect.CO_ITERABLE_COROUTINE
        )
    if hasattr(function, "__wrapped__"):  # a wrapping object: judged by what it wraps
        return _is_generator(inspect.unwrap(function))  # type: ignore[arg-type]
    call = inspect.getattr_static(type(function), "__call__", None)
    return inspect.isfunction(call) and _is_generator(call)
