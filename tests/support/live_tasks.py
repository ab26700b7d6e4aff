"""`LiveTasks`: the live tasks of the running event loop, counted exactly at every task's
start and end (asyncio: a task factory; trio: an instrument), and their peak."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import sniffio


class LiveTasks:
    """While `counting`: ``live`` is the number of tasks alive now (those alive when it
    began included), ``peak`` the most there ever were at one instant."""

    def __init__(self) -> None:
        self.live = self.peak = 0

    def _started(self, *_: object) -> None:
        self.live += 1
        if self.live > self.peak:
            self.peak = self.live

    def _ended(self, *_: object) -> None:
        self.live -= 1

    @contextmanager
    def counting(self) -> Iterator[LiveTasks]:
        self.live = self.peak = len(anyio.get_running_tasks())
        if sniffio.current_async_library() == "trio":
            import trio

            counter = self

            class Instrument(trio.abc.Instrument):
                def task_spawned(self, task: trio.lowlevel.Task) -> None:
                    counter._started()

                def task_exited(self, task: trio.lowlevel.Task) -> None:
                    counter._ended()

            instrument = Instrument()
            trio.lowlevel.add_instrument(instrument)
            try:
                yield self
            finally:
                trio.lowlevel.remove_instrument(instrument)
            return
        loop = asyncio.get_running_loop()
        before = loop.get_task_factory()

        def factory(
            loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kw: Any
        ) -> asyncio.Task[Any]:
            task = asyncio.Task(coro, loop=loop, **kw)
            self._started()
            task.add_done_callback(self._ended)
            return task

        loop.set_task_factory(factory)  # type: ignore[arg-type]
        try:
            yield self
        finally:
            loop.set_task_factory(before)
