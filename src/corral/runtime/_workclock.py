"""Measuring the time a trial spends working (budgets' ``working_time_limit``)."""

from __future__ import annotations

import math

import anyio


class WorkClock:
    """Seconds a trial spent working, on the event loop's clock (virtual in tests).

    Running while an attempt executes; stopped while the trial waits for a retry's
    backoff. It is not running while the trial waits for admission or a rate limit,
    as it is created when the trial starts and stopped when it is deferred.
    """

    __slots__ = ("_spent", "_since")

    def __init__(self, spent: float = 0.0) -> None:
        self._spent = spent
        self._since: float | None = None

    def start(self) -> None:
        if self._since is None:
            self._since = anyio.current_time()

    def stop(self) -> None:
        if self._since is not None:
            self._spent += anyio.current_time() - self._since
            self._since = None

    @property
    def spent(self) -> float:
        if self._since is None:
            return self._spent
        return self._spent + anyio.current_time() - self._since

    def deadline(self, limit: float | None) -> float:
        """When a running clock reaches ``limit`` seconds, on the event loop's clock."""
        if limit is None:
            return math.inf
        return anyio.current_time() + max(0.0, limit - self.spent)
