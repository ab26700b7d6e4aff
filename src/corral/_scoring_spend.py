"""What the model calls of the evaluation attempt running now spent (`Scorer.ask`'s),
so an attempt that raises after a grader answered still counts what it paid for."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ._types import NO_USAGE, Usage


class Spent:
    """The usage of one evaluation attempt's calls, summed as they reply."""

    def __init__(self) -> None:
        self.usage: Usage = NO_USAGE

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Calls made inside (in this task, or tasks it starts) add to this."""
        token = _current.set(self)
        try:
            yield
        finally:
            _current.reset(token)


_current: ContextVar[Spent | None] = ContextVar("corral_scoring_spend", default=None)


def spend(usage: Usage) -> None:
    """Count ``usage`` for the evaluation attempt running now, if any."""
    spent = _current.get()
    if spent is not None and usage:
        spent.usage = spent.usage + usage
