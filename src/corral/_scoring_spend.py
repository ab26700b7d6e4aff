"""What the model calls of the evaluation attempt running now spent (`Scorer.ask`'s),
so an attempt that raises after a grader answered still counts what it paid for."""

from __future__ import annotations

from contextvars import ContextVar

from ._types import Usage

#: The usage of one evaluation attempt's calls, summed as they reply: a one-item list
#: (a cell), made and set in `SPENDING` by the attempt (``token = SPENDING.set([NO_USAGE])``,
#: then ``SPENDING.reset(token)``); calls made meanwhile (in that task, or tasks it
#: starts) add to it. Not a class entered with ``with``: it is made once per trial's
#: evaluation, where its ``__init__``, ``__enter__`` and ``__exit__`` would be three
#: Python calls (a list is made in C).
Spent = list[Usage]

#: The evaluation attempt running now's `Spent` (None: none is).
SPENDING: ContextVar[Spent | None] = ContextVar("corral_scoring_spend", default=None)


def spend(usage: Usage) -> None:
    """Count ``usage`` for the evaluation attempt running now, if any."""
    spent = SPENDING.get()
    if spent is not None and usage:
        spent[0] = spent[0] + usage
