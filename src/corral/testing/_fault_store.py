"""`FaultStore`: a commit store that fails one chosen append, before or after it lands."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

from .._checks import positive_int
from .._errors import ConfigError, StoreError
from .._types import Commit
from ..history import KINDS, ConfigStream
from ..store._protocol import BenchmarkInfo, CommitStore, Pending, TrialKey, TrialSummary
from ..store._runs import RunRecord


class FaultStore:
    """Wraps any `corral.CommitStore` and fails one append, as a flaky store, a lost
    network reply or a dying process would.

    The ``nth`` append that holds a commit of ``kind`` (to ``key``, or to any trial
    where ``key`` is None) fails with ``error``: before it reaches the store
    (``after=False``: nothing of it lands) or once it has landed (``after=True``:
    the commits are stored, but the caller hears the failure, as when the
    acknowledgement is lost). It fires once; ``seen`` counts the matching appends
    handed over and ``fired`` tells whether the fault happened. Everything else
    passes to the wrapped store, so a run resumed on ``inner`` afterwards sees what
    really landed::

        memory = MemoryStore()
        store = FaultStore(memory, kind="terminal", after=True)
        await CorralRunner(tasks, agents, environments, store=store).run("bench")

    A `BaseException` that is not an `Exception` (a test's own ``Crash``) stops the
    run as a killed process would; an `Exception` is a transient failure that the
    run retries.
    """

    def __init__(
        self,
        inner: CommitStore,
        *,
        kind: str,
        key: TrialKey | None = None,
        nth: int = 1,
        after: bool = False,
        error: BaseException | None = None,
    ) -> None:
        # A misspelt kind would never fire, and nothing would say so.
        if not isinstance(kind, str) or kind not in KINDS:
            known = ", ".join(sorted(KINDS))
            raise ConfigError(f"FaultStore kind must be a commit kind ({known}), got {kind!r}")
        positive_int("FaultStore nth", nth)
        self.inner = inner
        self.kind = kind
        self.key = key
        self.nth = nth
        self.after = after
        self.error = error if error is not None else StoreError(f"injected fault at {kind}")
        self.seen = 0
        self.fired = False

    def _fires(self, key: TrialKey, commits: Sequence[Commit]) -> bool:
        if self.key is not None and key != self.key:
            return False
        if not any(c.kind == self.kind for c in commits):
            return False
        self.seen += 1
        return self.seen == self.nth and not self.fired

    def enqueue(self, key: TrialKey, commits: Sequence[Commit]) -> Pending:
        fire = self._fires(key, commits)
        if fire and not self.after:
            self.fired = True
            raise self.error
        landed = self.inner.enqueue(key, commits)
        if not fire:
            return landed
        self.fired = True
        return _LostAcknowledgement(landed, self.error)

    async def append(self, key: TrialKey, commits: Sequence[Commit]) -> None:
        await self.enqueue(key, commits).wait()

    def opened(self) -> AbstractAsyncContextManager[None]:
        return self.inner.opened()

    def claim(self, benchmark_id: str) -> AbstractAsyncContextManager[None]:
        return self.inner.claim(benchmark_id)

    async def register_benchmark(
        self,
        benchmark_id: str,
        config: Mapping[str, Any] | ConfigStream,
        *,
        created_at: float | None = None,
    ) -> bool:
        return await self.inner.register_benchmark(benchmark_id, config, created_at=created_at)

    async def history(self, key: TrialKey) -> list[Commit]:
        return await self.inner.history(key)

    async def summaries(self, benchmark_id: str) -> list[TrialSummary]:
        return await self.inner.summaries(benchmark_id)

    def scan(self, benchmark_id: str) -> AsyncIterator[list[TrialSummary]]:
        return self.inner.scan(benchmark_id)

    async def benchmark_config(self, benchmark_id: str) -> Mapping[str, Any] | None:
        return await self.inner.benchmark_config(benchmark_id)

    async def benchmarks(self) -> list[BenchmarkInfo]:
        return await self.inner.benchmarks()

    async def record_run(self, benchmark_id: str, record: RunRecord) -> None:
        await self.inner.record_run(benchmark_id, record)

    async def runs(self, benchmark_id: str) -> list[RunRecord]:
        return await self.inner.runs(benchmark_id)

    def __getattr__(self, name: str) -> Any:
        # What the protocol gains later (capabilities) is the wrapped store's.
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)


class _LostAcknowledgement:
    """The commits landed, but the caller hears ``error``."""

    __slots__ = ("_error", "_inner")

    def __init__(self, inner: Pending, error: BaseException) -> None:
        self._inner = inner
        self._error = error

    def done(self) -> bool:
        return self._inner.done()

    def check(self) -> None:
        self._inner.check()
        raise self._error

    async def wait(self) -> None:
        await self._inner.wait()
        raise self._error
