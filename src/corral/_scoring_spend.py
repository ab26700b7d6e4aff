"""What the model calls of the evaluation attempt running now spent (`Scorer.ask`'s),
so an attempt that raises after a grader answered still counts what it paid for."""

from __future__ import annotations

from contextvars import ContextVar, Token

from ._types import NO_USAGE, Usage


class Spent:
    """The usage of one evaluation attempt's calls, summed as they reply: ``with spent:``,
    calls made inside (in this task, or tasks it starts) add to it. (A class of its own,
    not a generator's context manager: it runs once per trial's evaluation.)"""

    __slots__ = ("usage", "_token")

    def __init__(self) -> None:
        self.usage: Usage = NO_USAGE
        self._token: Token[Spent | None] | None = None

    def __enter__(self) -> None:
        self._token = _current.set(self)

    def __exit__(self, *exc: object) -> None:
        assert self._token is not None
        _current.reset(self._token)
        self._token = None


_current: ContextVar[Spent | None] = ContextVar("corral_scoring_spend", default=None)


def spend(usage: Usage) -> None:
    """Count ``usage`` for the evaluation attempt running now, if any."""
    spent = _current.get()
    if spent is not None and usage:
        spent.usage = spent.usage + usage
