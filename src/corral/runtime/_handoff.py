"""A worker task waiting to be handed its next piece of work (reused, not respawned).

Starting a task per trial costs more than the trial's own bookkeeping (anyio's
task spawning), so the worker pool (`executor/_pool.py`, in process and on each
Ray host) keeps the tasks that ran out of work waiting here for the next one;
``None`` tells a waiting task to end. Each worker has one handoff, reused every
time it waits (a worker runs out of work about once a trial).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any, Generic, TypeVar

import anyio
import anyio.lowlevel

T = TypeVar("T")


class Handoff(Generic[T]):
    """Any backend's: an event made for each wait (``new_event``: the backend's)."""

    __slots__ = ("_event", "_item", "_new_event")

    def __init__(self, new_event: Callable[[], anyio.Event] = anyio.Event) -> None:
        self._new_event = new_event
        self._event: anyio.Event | None = None
        self._item: T | None = None

    def hand(self, item: T | None) -> None:
        """Give ``item`` to the task that waits (`wait` has begun: it is in the idle list)."""
        self._item = item
        assert self._event is not None, "Handoff.hand before its wait"
        self._event.set()

    async def wait(self) -> T | None:
        self._event = self._new_event()
        await self._event.wait()
        return self._item


class LoopHandoff(Handoff[T]):
    """asyncio's: a future of the loop's for each wait, made and resolved in C (an anyio
    event is three Python objects, with a Python call to make, set and wait on each), on
    which a task waits, and is woken and cancelled, as on the event's own future."""

    __slots__ = ("_future", "_loop")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._loop = loop
        self._future: asyncio.Future[None] | None = None

    def hand(self, item: T | None) -> None:
        self._item = item
        future = self._future
        assert future is not None, "Handoff.hand before its wait"
        if not future.done():  # else its waiter was cancelled: nothing waits (as an event's)
            future.set_result(None)

    async def wait(self) -> T | None:
        self._future = future = self._loop.create_future()
        await future
        return self._item


def handoff_maker() -> Callable[[], Handoff[Any]]:
    """What makes a worker's handoff on the running event loop (asyncio's or trio's)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # trio
        # The backend's event, found once (anyio's ``Event()`` looks it up every time).
        return partial(Handoff, anyio.lowlevel.current_token().backend_class.create_event)
    return partial(LoopHandoff, loop)
