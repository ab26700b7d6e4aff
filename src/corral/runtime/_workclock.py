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
