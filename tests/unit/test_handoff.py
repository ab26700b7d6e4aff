"""A worker's handoff, reused at each of its waits, on asyncio (a loop future) and trio."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from corral.runtime._handoff import Handoff, LoopHandoff, handoff_maker

pytestmark = pytest.mark.anyio


async def test_a_handoff_is_reused_wait_after_wait_and_a_cancelled_wait_takes_nothing(
    anyio_backend: str,
) -> None:
    """Each wait returns what was handed after it began; a wait cancelled leaves the
    handoff to be handed to (nothing raised, nothing delivered), and the next wait
    gets only what is handed after it."""
    handoff: Handoff[str] = handoff_maker()()
    assert isinstance(handoff, LoopHandoff) == (anyio_backend == "asyncio")
    got: list[str | None] = []
    waiting = [False]

    async def waits() -> None:
        waiting[0] = True  # and the wait begins at once: nothing awaited between
        got.append(await handoff.wait())
        waiting[0] = False

    async def once_it_waits() -> None:
        while not waiting[0]:
            await anyio.lowlevel.checkpoint()

    for item in ("first", "second", None):
        async with anyio.create_task_group() as tg:
            tg.start_soon(waits)
            await once_it_waits()
            handoff.hand(item)
    assert got == ["first", "second", None]

    with anyio.CancelScope() as scope:
        scope.cancel()
        await handoff.wait()
    assert scope.cancelled_caught
    handoff.hand("lost")  # its waiter is gone: nothing raises
    async with anyio.create_task_group() as tg:
        tg.start_soon(waits)
        await once_it_waits()
        handoff.hand("after")
    assert got[-1] == "after"
