"""The working-time clock reads the event loop's own clock."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from corral.runtime._workclock import WorkClock, _event_loop_clock


def test_asyncios_own_loop_clock_is_read_directly_and_another_loops_is_kept() -> None:
    """A loop whose ``time`` is asyncio's own is read through ``time.monotonic`` (what
    that method returns); a loop with a clock of its own keeps it."""

    class Virtual(asyncio.SelectorEventLoop):
        def time(self) -> float:
            return 1000.0

    async def clock() -> tuple[Callable[[], float], float, float]:
        now = _event_loop_clock()
        work = WorkClock(2.0)
        work.start()
        return now, now(), work.spent

    loop = asyncio.new_event_loop()
    try:
        before = loop.time()
        read, now, spent = loop.run_until_complete(clock())
        assert read is time.monotonic
        assert before <= now <= loop.time() and 2.0 <= spent < 3.0
    finally:
        loop.close()
    virtual = Virtual()
    try:
        read, now, spent = virtual.run_until_complete(clock())
        assert read == virtual.time and (now, spent) == (1000.0, 2.0)
    finally:
        virtual.close()
