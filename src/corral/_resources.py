"""Run-scoped resources of agents and environments (a model client's connection pool).

An agent or environment may define ``run_context(info)`` returning an async
context manager: the runner enters it before the run's first trial starts and
exits it after its last trial and evaluation ended, also when the run fails or
is cancelled, in the run's own event loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any


@asynccontextmanager
async def run_contexts(objects: Iterable[object], info: Any) -> AsyncIterator[None]:
    """Enter the ``run_context(info)`` of each distinct object that has one."""
    async with AsyncExitStack() as stack:
        seen: set[int] = set()
        for obj in objects:
            if id(obj) in seen:
                continue
            seen.add(id(obj))
            hook = getattr(obj, "run_context", None)
            if callable(hook):
                await stack.enter_async_context(hook(info))
        yield
