"""Measuring the time a trial spends working (budgets' ``working_time_limit``)."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable

import anyio


class WorkClock:
    """Seconds a trial spent working, on the event loop's clock (virtual in tests).

    Running while an attempt executes; stopped while the trial waits for a retry's
    backoff. It is not running while the trial waits for admission or a rate limit,
    as it is created when the trial starts and stopped when it is deferred.
    """

    __slots__ = ("_spent", "_since", "_now")

    def __init__(self, spent: float = 0.0) -> None:
        self._spent = spent
        self._since: float | None = None
        self._now = _event_loop_clock()

    def start(self) -> None:
        if self._since is None:
            self._since = self._now()

    def stop(self) -> None:
        if self._since is not None:
            self._spent += self._now() - self._since
            self._since = None

    @property
    def spent(self) -> float:
        if self._since is None:
            return self._spent
        return self._spent + self._now() - self._since

    def deadline(self, limit: float | None) -> float:
        """When a running clock reaches ``limit`` seconds, on the event loop's clock."""
        if limit is None:
            return math.inf
        return self._now() + max(0.0, limit - self.spent)


def to_microsecond(seconds: float) -> float:
    """``round(seconds, 6)``, the same float, for about half its instructions: a trial
    rounds its working time for every commit, and ``round`` with digits goes through
    decimal text (a conversion each way: some 2,900 instructions).

    Below 1e13, ``seconds * 1e6`` is within 0.001 of the exact product: unless its
    fraction is within 0.01 of a half, it rounds to the same whole microseconds as
    the exact product, and dividing them by 1e6 gives the float nearest to them, as
    ``round`` does. Near a half (a tie, or nearly), and for a negative or huge value,
    ``round`` itself decides. A float's: an int (a limit as given) is
    ``round``'s to keep as it is."""
    scaled = seconds * 1e6
    if 0.0 <= scaled < 1e13:
        fraction = scaled % 1.0
        if fraction < 0.49:
            return (scaled - fraction) / 1e6
        if fraction > 0.51:
            return (scaled - fraction + 1.0) / 1e6
    return round(seconds, 6)


def _event_loop_clock() -> Callable[[], float]:
    """`anyio.current_time`, looked up once: it is read at every commit a trial writes.

    An asyncio loop whose ``time`` is asyncio's own reads ``time.monotonic`` (all that
    method does, in a Python call more, six a trial): that is read directly."""
    try:
        loop = asyncio.get_running_loop()  # whose time anyio's asyncio backend reads
    except RuntimeError:  # trio (its MockClock in tests)
        return anyio.current_time
    if type(loop).time is asyncio.BaseEventLoop.time:
        return time.monotonic
    return loop.time
