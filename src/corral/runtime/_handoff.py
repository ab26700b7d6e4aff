"""A worker task waiting to be handed its next piece of work (reused, not respawned).

Starting a task per trial costs more than the trial's own bookkeeping (anyio's
task spawning), so the worker pool (`executor/_pool.py`, in process and on each
Ray host) keeps the tasks that ran out of work waiting here for the next one;
``None`` tells a waiting task to end.
"""

from __future__ import annotations

from typing import Generic, TypeVar

import anyio

T = TypeVar("T")


class Handoff(Generic[T]):
    __slots__ = ("_event", "_item")

    def __init__(self, event: anyio.Event | None = None) -> None:
        self._event = anyio.Event() if event is None else event
        self._item: T | None = None

    def hand(self, item: T | None) -> None:
        self._item = item
        self._event.set()

    async def wait(self) -> T | None:
        await self._event.wait()
        return self._item
