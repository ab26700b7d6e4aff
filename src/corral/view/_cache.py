"""Each benchmark's trial list and report, loaded once and reloaded when the store changes.

A load reads the store's ``scan`` in the background; the list in scan order is
served from the rows loaded so far, everything else once the load is done. While
a benchmark is live (some trial unfinished) its data is reloaded when older than
``refresh`` seconds (or three times as long as a load takes); a finished one when
its trial heads change (a rerun reopening a trial, which its report goes on
counting as it was until it ends again) or a run is recorded (a rescore, a resume:
each records its run once done), each looked up at most once per ``refresh``
seconds. Until a reload is done, the previous load keeps
being served; each load has a new ``version``, so a page knows its data changed (one
read again unchanged, after it was dropped to make room, keeps its dropped load's).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, NamedTuple

import anyio
from anyio.abc import TaskGroup

from .._errors import ConfigError, StoreCorrupt
from ..history import StoredConfig
from ..report import BenchmarkReport, is_finished
from ..report._build import task_list
from ..report._passk import default_ks
from ..report._stored import stored_report
from ..store import CommitStore
from ..store._heads import HeadStore, TrialHead, heads_of, task_list_of_config
from ..store._runs import RunRecord
from ._charts import charts
from ._index import Row, facets, row_of, row_of_head

#: Uses of `collections_paused` under way, whether the collector ran before the first,
#: and the lock of both (an app served from several threads: tests).
_paused: list[Any] = [0, False]
_pause_lock = threading.Lock()


@contextmanager
def collections_paused() -> Iterator[None]:
    """The cyclic garbage collector off while it lasts (uses that overlap: until the
    last one ends; then as it was). A load makes a few hundred thousand objects that
    live on (the configuration's entries, each trial's head and row), which the
    collector, run every 700 allocations, walked again and again: a third of the CPU
    of loading 100,000 trials. What a load drops is freed as it goes (no cycles);
    cycles other requests make meanwhile wait for the next collection."""
    with _pause_lock:
        if _paused[0] == 0:
            _paused[1] = gc.isenabled()
            gc.disable()
        _paused[0] += 1
    try:
        yield
    finally:
        with _pause_lock:
            _paused[0] -= 1
            if _paused[0] == 0 and _paused[1]:
                gc.enable()


def config_summary(config: Mapping[str, Any]) -> dict[str, Any]:
    """What the pages show of a stored configuration (checked by the store), read from
    its entries as stored: no object per task (a missing field as `StoredTask`'s default)."""
    entries = list(config.get("tasks", {}).values())
    return {
        "tasks": len(entries),
        "trials_per_task": StoredConfig.decode(config).trials_per_task,
        "models": sorted({str(m) for m in {e.get("model") for e in entries} if m}),
        "environments": sorted({str(e.get("environment_id", "")) for e in entries}),
        "agents": sorted({str(e.get("agent_id", "")) for e in entries}),
    }


class Brief(NamedTuple):
    """What the cache keeps of a load it dropped (`ViewCache.keep`): the benchmarks page's
    line, and, as of the load, what tells whether the benchmark changed since."""

    benchmark_id: str
    version: int
    config_summary: dict[str, Any]
    started: float
    #: Wall-clock time the load started (`Loaded.loaded_at`).
    loaded_at: float
    took: float
    failure: str | None
    live: bool
    #: Finished trials as the report counted them (None while the load went on).
    finished: int | None
    runs: int
    #: `HeadStore.heads_written` of the heads loaded (None: the store keeps none).
    written: int | None
    trials_per_task: int
    pass_at_k: dict[int, float] | None
    errors: int | None


class Loaded:
    """One load of a benchmark: its rows (growing while loading) and, once done, its report."""

    def __init__(
        self, benchmark_id: str, config: Mapping[str, Any], now: float, version: int = 0
    ) -> None:
        self.benchmark_id = benchmark_id
        #: Which load of the benchmark this is (the viewer's count, from 1).
        self.version = version
        #: Wall-clock time the load started (what a page shows as "updated").
        self.loaded_at = time.time()
        #: Runs recorded when the load started (a new one means the data changed).
        self.runs = 0
        #: `HeadStore.heads_written` of the heads loaded (None: the store keeps none).
        self.written: int | None = None
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
        #: The distributions the page draws (`charts`), once loaded.
        self.charts: dict[str, Any] = {}
        #: The configuration as the pages show it.
        self.config_summary = config_summary(config)

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

    def brief(self) -> Brief:
        """What is kept of this load once it is dropped."""
        report = self.report
        return Brief(
            self.benchmark_id,
            self.version,
            self.config_summary,
            self.started,
            self.loaded_at,
            self.took,
            self.failure,
            self.live,
            None if report is None else report.finished,
            self.runs,
            self.written,
            self.trials_per_task,
            None if report is None else report.pass_at_k,
            None if report is None else report.counts.get("error", 0),
        )

    async def fill(self, store: CommitStore, reading: Reading | None = None) -> None:
        """Load the benchmark from ``store``: what ``reading`` reads of it (a `Reading`
        started when the load was asked for), else read now."""
        if reading is None:
            async with anyio.create_task_group() as tg:
                await self.fill(store, Reading(store, self.benchmark_id, tg))
            return
        start = time.perf_counter()
        try:
            with collections_paused():
                await self._fill(store, reading)
        except Exception as exc:  # shown to whoever asks, and retried by the next load
            self.failure = f"{type(exc).__name__}: {exc}"
            self.corrupt = str(exc) if isinstance(exc, StoreCorrupt) else None
        finally:
            reading.close()
            self.took = time.perf_counter() - start
            self.done.set()
            self._progress.set()

    async def _fill(self, store: CommitStore, reading: Reading) -> None:
        """The report from the store's trial heads, and the list: from the heads too
        when every trial finished, else from a scan (which shows running trials)."""
        # From the configuration in hand (read whole for the page): not decoded again.
        listed = task_list_of_config(self.config)
        if listed is None:
            listed = task_list(self.config)
        meta = {t: (model, environment) for t, model, environment in listed.tasks}
        runs = await reading.runs()
        self.runs = len(runs)
        n = self.trials_per_task

        def rows_of(chunk: list[TrialHead]) -> list[TrialHead]:
            self.written = (self.written or 0) + sum(head.next_seq for head in chunk)
            for head in chunk:
                task = meta.get(head.task_id)
                if task is not None and 0 <= head.trial < n:
                    self.rows.append(row_of_head(head, *task))
            self._progress.set()
            self._progress = anyio.Event()
            return chunk

        kept = reading.kept
        source = _Rows(store, reading.heads(), rows_of) if kept else store
        report = await stored_report(source, self.benchmark_id, listed, k_values=default_ks(n))
        if not kept or report.finished != self.expected:
            self.rows = []
            async for chunk in store.scan(self.benchmark_id):
                for s in chunk:
                    task = meta.get(s.task_id)
                    if task is None or not 0 <= s.trial < n:
                        continue
                    s = s.counted()  # as its head: a rerun's earlier attempt, until it ends
                    record = s.record(keep_state=False) if is_finished(s) else None
                    self.rows.append(row_of(s, record, *task))
                self._progress.set()
                self._progress = anyio.Event()
        self.facets = facets(self.rows)
        # The last run's tags, as `corral report`.
        self.report = report.labelled(runs[-1] if runs else None)
        self.charts = charts(self.rows, self.report)

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


class Reading:
    """What a load reads of the store, read in ``task_group`` from when the load is asked
    for: the benchmark's run records first (a run recorded while its trials are read is
    then seen as new next time), then, from a store that keeps them, its trial heads a
    chunk at a time, up to `AHEAD` chunks before they are used (the store reads the
    next while the last is used, and while the configuration is decoded)."""

    AHEAD = 4

    def __init__(self, store: CommitStore, benchmark_id: str, task_group: TaskGroup) -> None:
        #: True when the store keeps trial heads (else only the runs are read).
        self.kept = isinstance(store, HeadStore)
        self._send, self._receive = anyio.create_memory_object_stream[Any](self.AHEAD)
        task_group.start_soon(self._read, store, benchmark_id)

    async def _read(self, store: CommitStore, benchmark_id: str) -> None:
        with self._send as send:
            try:
                await send.send(await store.runs(benchmark_id))
                if self.kept:
                    async for chunk in heads_of(store, benchmark_id):
                        await send.send(chunk)
            except anyio.BrokenResourceError:  # the load ended without reading on
                pass
            except Exception as exc:  # raised where the load reads next
                with suppress(anyio.BrokenResourceError):
                    await send.send(_Failed(exc))

    async def _next(self) -> Any:
        item = await self._receive.receive()
        if isinstance(item, _Failed):
            raise item.exc
        return item

    async def runs(self) -> list[RunRecord]:
        """The benchmark's run records."""
        runs: list[RunRecord] = await self._next()
        return runs

    async def heads(self) -> AsyncIterator[list[TrialHead]]:
        """The benchmark's trial heads, in chunks (after `runs`)."""
        while True:
            try:
                chunk: list[TrialHead] = await self._next()
            except anyio.EndOfStream:
                return
            yield chunk

    def close(self) -> None:
        """Read no more (what is being read is dropped)."""
        self._receive.close()


class _Failed(NamedTuple):
    """What a `Reading` read instead of its next item: the exception it met."""

    exc: Exception


class _Rows:
    """A store whose heads are ``chunks``, each also handed to ``seen`` (one read serves
    the report and the trial list)."""

    def __init__(
        self,
        store: Any,
        chunks: AsyncIterator[list[TrialHead]],
        seen: Callable[[list[TrialHead]], list[TrialHead]],
    ) -> None:
        self._store = store
        self._chunks = chunks
        self._seen = seen

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def heads(self, benchmark_id: str) -> AsyncIterator[list[TrialHead]]:
        async for chunk in self._chunks:
            yield self._seen(chunk)


def _version_answer(loaded: Brief | Loaded) -> dict[str, Any]:
    """`ViewCache.version`'s answer, of a load or of what was kept of one."""
    return {"version": loaded.version, "loaded_at": loaded.loaded_at, "live": loaded.live}


#: What says a finished benchmark changed: (finished trials, runs, heads written).
_Counts = tuple[int | None, int, int | None]


def _counts_of(loaded: Brief) -> _Counts:
    """`ViewCache._counts` as ``loaded`` read them."""
    return (loaded.finished, loaded.runs, loaded.written)


class LoadFailed(Exception):
    """The store could not be read."""


class _Turn:
    """A load's place in line for a slot of `ViewCache` (given by `ViewCache._wake`)."""

    def __init__(self, opened: bool) -> None:
        #: Asked for by the benchmark's own page, not only for its line on the benchmarks page.
        self.opened = opened
        #: Set once the load may read.
        self.given = anyio.Event()


class ViewCache:
    """Loads per benchmark id, started in ``task_group`` on first use. At most ``keep``
    loads are held or reading at once (a 100,000-trial load is some 200 MB): the least
    recently used held one is dropped to make room, and a load that finds none waits in line.
    Of one dropped, its line on the benchmarks page is kept, and it is read again when
    next used. The benchmarks page's lines are read one at a time, behind a benchmark
    opened: the first visit does not read every benchmark at once, nor make one opened
    wait for them."""

    #: Loads held or reading at most.
    KEEP = 4

    def __init__(
        self,
        store: CommitStore,
        task_group: TaskGroup,
        *,
        refresh: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        keep: int = KEEP,
    ) -> None:
        self.store = store
        self._tg = task_group
        self.refresh = refresh
        self.keep = keep
        self._clock = clock
        self._current: dict[str, Loaded] = {}  # the latest finished load
        self._pending: dict[str, Loaded] = {}  # a load in progress (in line or reading)
        self._line: dict[str, _Turn] = {}  # loads waiting for a slot, first come first
        self._reading: dict[str, bool] = {}  # loads given a slot, and whether opened
        self._dropped: dict[str, Brief] = {}  # what is kept of a load dropped
        self._used: dict[str, None] = {}  # benchmark ids, least recently used first
        # Per benchmark: when its finished trials and runs were last counted, and the counts.
        self._counted: dict[str, tuple[float, _Counts]] = {}
        self._versions = 0  # loads started
        self._lock = anyio.Lock()

    async def get(self, benchmark_id: str) -> Loaded:
        """The latest load of the benchmark (maybe still loading); a `ConfigError` if unknown."""
        # One at a time: two requests at once must not both start a load.
        async with self._lock:
            # The most recently used from now: never the load dropped to make room.
            self._used.pop(benchmark_id, None)
            self._used[benchmark_id] = None
            try:
                return await self._get(benchmark_id, opened=True)
            except ConfigError:
                del self._used[benchmark_id]
                raise

    async def brief(self, benchmark_id: str) -> Brief:
        """The benchmark's line on the benchmarks page, not counted as a use: of its load,
        or of the one dropped (while it is read again, if the benchmark changed since)."""
        async with self._lock:
            self._settle()
            dropped = self._dropped.get(benchmark_id)
            if dropped is None:
                return (await self._get(benchmark_id, opened=False)).brief()
            if await self._stale(dropped):
                await self._get(benchmark_id, opened=False)
            return dropped

    async def version(self, benchmark_id: str) -> dict[str, Any]:
        """Which load of the benchmark is served, its start and whether it is live (what
        a page polls to redraw when it changes). Of one dropped and unchanged, its
        dropped load's, not read again: a page left open polls it every few seconds, and
        with more pages open than `keep` each poll read a benchmark again whole."""
        async with self._lock:
            self._settle()
            dropped = self._dropped.get(benchmark_id)
            if dropped is not None and benchmark_id in self._pending:
                dropped = None  # read again already: the load's
            if dropped is not None and not await self._stale(dropped):
                return _version_answer(dropped)
        return _version_answer(await self.get(benchmark_id))

    async def _get(self, benchmark_id: str, *, opened: bool) -> Loaded:
        self._settle()
        current = self._current.get(benchmark_id)
        pending = self._pending.get(benchmark_id)
        if pending is None and (current is None or await self._stale(current.brief())):
            pending = await self._load(benchmark_id, opened)
        elif opened and benchmark_id in self._line:  # opened now: read ahead of the lines
            self._line[benchmark_id].opened = True
            self._wake()
        return current if current is not None else pending  # type: ignore[return-value]

    async def _load(self, benchmark_id: str, opened: bool) -> Loaded:
        """A new load of the benchmark, in line for a slot (`_wake`); its configuration
        is read now (the benchmarks page shows it while the load waits)."""
        turn = _Turn(opened)
        self._line[benchmark_id] = turn
        self._wake()
        # Given a slot at once: the trials are read from now, while the configuration is.
        reading = Reading(self.store, benchmark_id, self._tg) if turn.given.is_set() else None
        try:
            with collections_paused():
                config = await self.store.benchmark_config(benchmark_id)
                if config is None:
                    raise ConfigError(f"no benchmark {benchmark_id!r} in the store")
                version, same = await self._version_of(benchmark_id)
                loaded = Loaded(benchmark_id, config, self._clock(), version)
        except BaseException:
            if reading is not None:
                reading.close()
            self._line.pop(benchmark_id, None)
            self._reading.pop(benchmark_id, None)
            self._wake()
            raise
        self._pending[benchmark_id] = loaded
        self._tg.start_soon(self._fill, loaded, turn, reading, same)
        return loaded

    async def _version_of(self, benchmark_id: str) -> tuple[int, _Counts | None]:
        """A new load's version, and the counts it must find to keep it: a benchmark
        dropped only to make room (finished, unchanged as far as `_stale` knows) is
        read again as the same data, under its dropped load's version (a page shown
        again, or watching it, must not say the store changed, nor redraw); any
        other load has a new version."""
        dropped = self._dropped.get(benchmark_id)
        if dropped is not None and not dropped.live and not await self._stale(dropped):
            return dropped.version, _counts_of(dropped)
        self._versions += 1
        return self._versions, None

    async def _fill(
        self, loaded: Loaded, turn: _Turn, reading: Reading | None, same: _Counts | None
    ) -> None:
        """Fill ``loaded`` once its turn comes; then it takes its benchmark's place at once
        (not at the next request: the loads held stay within `keep`), and the next in
        line reads. One that kept its dropped load's version (``same``: the counts that
        load read) and read otherwise has a new one: it changed since last counted."""
        benchmark_id = loaded.benchmark_id
        try:
            if reading is None:
                await turn.given.wait()
                loaded.started, loaded.loaded_at = self._clock(), time.time()
                reading = Reading(self.store, benchmark_id, self._tg)
            await loaded.fill(self.store, reading)
            brief = loaded.brief()
            if same is not None and (brief.failure or brief.live or _counts_of(brief) != same):
                self._versions += 1
                loaded.version = self._versions
        finally:
            if self._line.get(benchmark_id) is turn:  # cancelled in line
                del self._line[benchmark_id]
            self._reading.pop(benchmark_id, None)
            self._settle()
            self._wake()

    def _wake(self) -> None:
        """Give free slots to the loads in line: benchmarks opened first, in turn, then
        the benchmarks page's lines, one reading at a time (what is opened is not kept
        waiting for them). A slot is free while fewer than `keep` loads are reading; the
        least recently used held loads are dropped to make room for the one given it."""
        for benchmark_id, turn in sorted(self._line.items(), key=lambda item: not item[1].opened):
            if len(self._reading) >= self.keep:
                return
            if not turn.opened and not all(self._reading.values()):
                return  # a line is being read: the rest wait for it
            del self._line[benchmark_id]
            self._reading[benchmark_id] = turn.opened
            self._drop_unused()
            turn.given.set()

    def _settle(self) -> None:
        """Every load done since takes its benchmark's place (a failed one only where none
        was), and the least recently used are dropped: any request does it, so a load
        no one asks for again is not held meanwhile."""
        for benchmark_id, pending in list(self._pending.items()):
            if pending.done.is_set():
                del self._pending[benchmark_id]
                if pending.failure is None or benchmark_id not in self._current:
                    self._current[benchmark_id] = pending
                    self._dropped.pop(benchmark_id, None)
        self._drop_unused()

    def _drop_unused(self) -> None:
        """Drop the least recently used loads (one never used first) until those held and
        those reading are `keep` at most."""
        order = {benchmark_id: i for i, benchmark_id in enumerate(self._used)}
        by_use = sorted(self._current, key=lambda benchmark_id: order.get(benchmark_id, -1))
        room = max(0, self.keep - len(self._reading))
        for benchmark_id in by_use[: max(0, len(by_use) - room)]:
            self._dropped[benchmark_id] = self._current.pop(benchmark_id).brief()

    async def newest(self, benchmark_id: str) -> Loaded:
        """The benchmark once a load started by now is done (a reload included)."""
        loaded = await self.get(benchmark_id)
        loaded = self._pending.get(benchmark_id, loaded)
        await loaded.ready()
        return loaded

    async def _stale(self, loaded: Brief) -> bool:
        # A live benchmark reloads every refresh seconds, but spends at most a third
        # of the time loading (a 100,000-trial load takes seconds).
        every = max(self.refresh, 3 * loaded.took)
        if loaded.failure is not None or (loaded.live and self._clock() - loaded.started >= every):
            return True
        if loaded.finished is None:
            return False
        return await self._counts(loaded) != _counts_of(loaded)

    async def _counts(self, loaded: Brief) -> _Counts:
        """The benchmark's finished trials (as its report counts them), recorded runs and
        `HeadStore.heads_written`: the store is asked at most once per refresh, the
        load's own until then."""
        benchmark_id = loaded.benchmark_id
        now = self._clock()
        at, counts = self._counted.get(benchmark_id, (float("-inf"), (None, 0, None)))
        if at < loaded.started:  # the load's own counts are the newer
            at, counts = loaded.started, _counts_of(loaded)
        if now - at >= self.refresh:
            store = self.store
            finished: int | None
            written = None
            if isinstance(store, HeadStore):  # one count of its heads, and one sum
                finished = await store.finished_trials(benchmark_id, loaded.trials_per_task)
                written = await store.heads_written(benchmark_id)
            else:
                found = {b.benchmark_id: b.finished for b in await store.benchmarks()}
                finished = found.get(benchmark_id)
            counts = (finished, len(await store.runs(benchmark_id)), written)
            self._counted[benchmark_id] = (now, counts)
        return counts
