"""`LaggingStore`: a memory store whose appends become durable only when a test says so."""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from .._types import Commit
from ..store._protocol import Pending, TrialKey
from ..store.memory import MemoryStore


class _Held:
    """An append's handle that is done only once released."""

    __slots__ = ("_inner", "_landed")

    def __init__(self, inner: Pending) -> None:
        self._inner = inner
        self._landed = anyio.Event()

    def release(self) -> None:
        self._landed.set()

    def done(self) -> bool:
        return self._landed.is_set()

    def check(self) -> None:
        self._inner.check()

    async def wait(self) -> None:
        await self._landed.wait()
        await self._inner.wait()


class LaggingStore(MemoryStore):
    """A `corral.MemoryStore` that lags behind the trials as far as a run lets it.

    Every append is kept at once (reads see it) but is acknowledged as durable
    only when the test calls `release`, so a test can hold a run exactly where
    a slow store would: ``held`` is how many appends wait, ``peak`` the most
    that ever waited at once.
    """

    def __init__(self) -> None:
        super().__init__()
        self._held: list[_Held] = []
        self.peak = 0

    @property
    def held(self) -> int:
        """How many appends wait for `release`."""
        return len(self._held)

    def enqueue(self, key: TrialKey, commits: Sequence[Commit]) -> Pending:
        handle = _Held(super().enqueue(key, commits))
        self._held.append(handle)
        self.peak = max(self.peak, len(self._held))
        return handle

    def release(self) -> None:
        """Acknowledge every append handed over so far, in order."""
        for handle in self._held:
            handle.release()
        self._held.clear()
