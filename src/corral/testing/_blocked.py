"""`wait_all_tasks_blocked`, without asyncio's 0.1 s naps."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio

# Zero-length sleeps to try before falling back to anyio's own (napping) wait.
_SPINS = 10_000


def _blocked(task: asyncio.Task[Any]) -> bool:
    waiter = task._fut_waiter  # type: ignore[attr-defined]
    return waiter is not None and not waiter.done()


def _quiet(this: asyncio.Task[Any]) -> bool:
    # Callbacks already scheduled (a finished task's done-callback, a future's
    # wake-up) can still unblock a task that looks blocked: wait for them too.
    if getattr(asyncio.get_running_loop(), "_ready", None):
        return False
    return all(_blocked(task) for task in asyncio.all_tasks() if task is not this)


async def wait_all_tasks_blocked() -> None:
    """Return once every other task is blocked on something that has not happened.

    On trio this is `trio.testing.wait_all_tasks_blocked`. On asyncio it checks
    every task, and that no callback is scheduled, after each zero-length
    sleep, where `anyio.wait_all_tasks_blocked` naps 0.1 s whenever a task is
    runnable. A task waiting for a worker thread counts as blocked, so use it
    with stores that need no threads (`corral.MemoryStore`).
    """
    try:
        this = asyncio.current_task()
    except RuntimeError:  # not asyncio
        this = None
    if this is None:
        await anyio.wait_all_tasks_blocked()
        return
    for _ in range(_SPINS):
        await asyncio.sleep(0)
        if _quiet(this):
            return
    await anyio.wait_all_tasks_blocked()
