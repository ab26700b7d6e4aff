"""The working-time clock reads the event loop's own clock."""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable

from corral.runtime._workclock import WorkClock, _event_loop_clock, to_microsecond


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


def test_working_time_is_rounded_to_the_microsecond_as_round_rounds_it() -> None:
    """`to_microsecond` gives ``round(seconds, 6)``'s float: off a tie, at ties (exact
    ones, where both round half to even, and the floats either side of them), whole
    microseconds, zero of either sign, negative and huge values, and random ones."""
    edges = [0.0, -0.0, 5e-7, 2.5e-6, 0.0078125, 1e-300, 12.3456785, 1e7, 1e13, 1e20]
    edges += [-4e-7, -1.5, math.inf, 1e13 / 1e6 - 1e-7]
    for micros in (0, 1, 7, 999_999, 12_345_678, 3_600_000_000, 9_999_999_999_999):
        for at in (micros / 1e6, (micros + 0.5) / 1e6):
            edges += [at, math.nextafter(at, 0.0), math.nextafter(at, math.inf)]
    rng = random.Random(6)
    spans = [1e-6, 1e-3, 1.0, 1e3, 1e6, 1e9, 1e12, 1e14]
    values = edges + [rng.random() * rng.choice(spans) for _ in range(20_000)]
    for seconds in values:
        got, want = to_microsecond(seconds), round(seconds, 6)
        assert got == want and math.copysign(1, got) == math.copysign(1, want), seconds
    assert math.isnan(to_microsecond(math.nan))
