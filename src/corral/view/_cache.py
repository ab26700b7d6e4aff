"""Each benchmark's trial list and report, loaded once and reloaded when the store changes.

A load reads the store's ``scan`` in the background; the list in scan order is
served from the rows loaded so far, everything else once the load is done. While
a benchmark is live (some trial unfinished) its data is reloaded when older than
``refresh`` seconds (or three times as long as a load takes); a finished one when
its count of finished trials changes (a rescore of a finished benchmark, which
changes no count, shows once the viewer restarts).
Until a reload is done, the previous load keeps being served.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .._errors import ConfigError, StoreCorrupt
from .._records import TrialTable
from ..history import StoredConfig
from ..report import BenchmarkReport, build_report, is_finished
from ..report._passk import default_ks
from ..store import CommitStore
from ._index import Row, facets, row_of


class Loaded:
    """One load of a benchmark: its rows (growing while loading) and, once done, its report."""

    def __init__(self, benchmark_id: str, config: Mapping[str, Any], now: float) -> None:
        self.benchmark_id = benchmark_id
        self.config = config
        self.stored = StoredConfig.decode(config)
        self.trials_per_task = self.stored.trials_per_task
        self.expected = len(self.stored.tasks) * self.trials_per_task
        self.rows: list[Row] = []
        self.started = now
        self.done = anyio.Event()
        self._progress = anyio.Event()  # set (and replaced) each time rows arrive
        self.report: BenchmarkReport | None = None
        self.failure: str | None = None
        self.corrupt: str | None = None
        self.took = 0.0  # seconds the load took, once done
        self._by_key: dict[tuple[str, int], Row] | None = None
        #: Trials per model, environment and status, once loaded.
        self.facets: dict[str, dict[str, int]] = {}

    def find(self, task_id: str, trial: int) -> Row | None:
        """A trial's row (by a dict built once the load is done; until then by search)."""
        if not self.done.is_set():
            return next((r for r in self.rows if r.task_id == task_id and r.trial == trial), None)
        if self._by_key is None:
            self._by_key = {(r.task_id, r.trial): r for r in self.rows}
        return self._by_key.get((task_id, trial))

    @property
    def live(self) -> bool:
        """True while some trial of the benchmark has not finished."""
        return self.report is None or self.report.finished < self.expected

    async def fill(self, store: CommitStore) -> None:
        start = time.perf_counter()
        try:
            await self._fill(store)
        except Exception as exc:  # shown to whoever asks, and retried by the next load
            self.failure = f"{type(exc).__name__}: {exc}"
            self.corrupt = str(exc) if isinstance(exc, StoreCorrupt) else None
        finally:
            self.took = time.perf_counter() - start
            self.done.set()
            self._progress.set()

    async def _fill(self, store: CommitStore) -> None:
        tasks = self.stored.tasks
        meta = {t: (m.model, str(m.environment_id)) for t, m in tasks.items()}
        table = TrialTable(self.trials_per_task)
        async for chunk in store.scan(self.benchmark_id):
            for s in chunk:
                task = meta.get(s.task_id)
                if task is None or not 0 <= s.trial < self.trials_per_task:
                    continue
                record = s.record(keep_state=False) if is_finished(s) else None
                if record is not None:
                    table.add(record)
                self.rows.append(row_of(s, record, *task))
            self._progress.set()
            self._progress = anyio.Event()
        self.facets = facets(self.rows)
        self.report = build_report(
            self.benchmark_id,
            self.config,
            records=table,
            k_values=default_ks(self.trials_per_task),
        )

    async def at_least(self, rows: int) -> None:
        """Wait until ``rows`` rows are loaded, or the load is over."""
        while len(self.rows) < rows and not self.done.is_set():
            await self._progress.wait()

    async def ready(self) -> None:
        """Wait for the load to finish; a `LoadFailed` if it failed."""
        await self.done.wait()
        if self.corrupt is not None:  # bad input, not a failure: said as it is
            raise StoreCorrupt(self.corrupt)
        if self.failure is not None:
            raise LoadFailed(f"reading benchmark {self.benchmark_id!r} failed: {self.failure}")


class LoadFailed(Exception):
    """The store could not be read."""


class ViewCache:
    """Loads per benchmark id, started in ``task_group`` on first use."""

    def __init__(
        self,
        store: CommitStore,
        task_group: TaskGroup,
        *,
        refresh: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self._tg = task_group
        self.refresh = refresh
        self._clock = clock
        self._current: dict[str, Loaded] = {}  # the latest finished load
        self._pending: dict[str, Loaded] = {}  # a load in progress
        self._finished: dict[str, int] = {}  # finished trials per benchmark, as last counted
        self._counted_at = float("-inf")

    async def finished_counts(self) -> dict[str, int]:
        """Finished trials per benchmark id (the store is asked at most once per refresh)."""
        now = self._clock()
        if now - self._counted_at >= self.refresh:
            self._counted_at = now
            self._finished = {b.benchmark_id: b.finished for b in await self.store.benchmarks()}
        return self._finished

    async def get(self, benchmark_id: str) -> Loaded:
        """The latest load of the benchmark (maybe still loading); a `ConfigError` if unknown."""
        current = self._current.get(benchmark_id)
        pending = self._pending.get(benchmark_id)
        if pending is not None and pending.done.is_set():
            del self._pending[benchmark_id]
            if pending.failure is None or current is None:
                self._current[benchmark_id] = current = pending
            pending = None
        if pending is None and (current is None or await self._stale(current)):
            config = await self.store.benchmark_config(benchmark_id)
            if config is None:
                raise ConfigError(f"no benchmark {benchmark_id!r} in the store")
            pending = self._pending[benchmark_id] = Loaded(benchmark_id, config, self._clock())
            self._tg.start_soon(pending.fill, self.store)
        return current if current is not None else pending  # type: ignore[return-value]

    async def newest(self, benchmark_id: str) -> Loaded:
        """The benchmark once a load started by now is done (a reload included)."""
        loaded = await self.get(benchmark_id)
        loaded = self._pending.get(benchmark_id, loaded)
        await loaded.ready()
        return loaded

    async def _stale(self, loaded: Loaded) -> bool:
        # A live benchmark reloads every refresh seconds, but spends at most a third
        # of the time loading (a 100,000-trial load takes seconds).
        every = max(self.refresh, 3 * loaded.took)
        if loaded.failure is not None or (loaded.live and self._clock() - loaded.started >= every):
            return True
        counted = (await self.finished_counts()).get(loaded.benchmark_id)
        return loaded.report is not None and counted != loaded.report.finished
