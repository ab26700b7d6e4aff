"""The embedded default store: SQLite in WAL mode, one writer committing in batches.

Appends from every running trial are gathered into the next batch while the
previous one is being written; a batch is one transaction, and an append is
acknowledged only after that transaction has committed. The writer connection
is used by one worker thread at a time (a capacity limiter of one); readers
have their own connection, which WAL lets run beside the writer.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal

import anyio
import anyio.to_thread

from .._errors import (
    BenchmarkBusyError,
    CommitConflictError,
    ConfigError,
    StoreError,
    unwrap_single,
)
from .._json import dumps, loads
from .._types import NO_USAGE, Commit, Usage
from ._config_diff import check_same_config
from ._protocol import BenchmarkInfo, TrialKey, TrialSummary
from ._summary import SummaryBuilder

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS benchmarks (
    benchmark_id TEXT PRIMARY KEY,
    config TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS commits (
    benchmark_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    trial INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    created_at REAL NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cost REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (benchmark_id, task_id, trial, seq)
) WITHOUT ROWID;
"""

_INSERT = (
    "INSERT INTO commits (benchmark_id, task_id, trial, seq, kind, payload, created_at, "
    "input_tokens, output_tokens, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

_SCAN = (
    "SELECT task_id, trial, seq, kind, "
    "CASE WHEN kind IN ('terminal', 'evaluation') THEN payload END, "
    "created_at, input_tokens, output_tokens, cost "
    "FROM commits WHERE benchmark_id = ? ORDER BY task_id, trial, seq"
)

# Rows are encoded when handed over, so a payload mutated afterwards (a session's
# state changed in place) cannot rewrite what is recorded.
_Request = tuple[TrialKey, list[tuple[Any, ...]]]


class _Batch:
    __slots__ = ("requests", "done", "errors")

    def __init__(self) -> None:
        self.requests: list[_Request] = []
        self.done = anyio.Event()
        self.errors: list[BaseException | None] = []


class _Slot:
    """One append's place in a batch: durable when the batch has committed."""

    __slots__ = ("store", "batch", "index")

    def __init__(self, store: SQLiteStore, batch: _Batch, index: int) -> None:
        self.store, self.batch, self.index = store, batch, index

    def done(self) -> bool:
        return self.batch.done.is_set()

    async def wait(self) -> None:
        if not self.batch.done.is_set():
            await self.batch.done.wait()
        self.check()

    def check(self) -> None:
        error = self.batch.errors[self.index]
        if error is not None:
            if isinstance(error, Exception) and not isinstance(error, StoreError):
                raise StoreError(f"{self.store!r}: append failed: {error}") from error
            raise error


class SQLiteStore:
    """Commit histories in one SQLite file (WAL).

    ``synchronous="NORMAL"`` (the default) makes every acknowledged commit
    survive a crash or kill of the process; ``"FULL"`` also survives a power
    loss or OS crash, at the price of an fsync per batch.
    """

    def __init__(self, path: str | os.PathLike[str], *, synchronous: Synchronous = "NORMAL"):
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigError(f"synchronous must be NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.path = Path(path)
        self.synchronous = synchronous
        self._writer: sqlite3.Connection | None = None
        self._reader: sqlite3.Connection | None = None
        self._write_limiter = anyio.CapacityLimiter(1)
        self._read_limiter = anyio.CapacityLimiter(1)
        self._batch = _Batch()
        self._inflight: set[_Batch] = set()  # handed to a writer, not yet committed
        # Set when a whole batch failed: nothing handed over after it may land, or a
        # history could have a gap (a trial's evaluation without its lost terminal).
        self._failed: BaseException | None = None
        # Trials with a failed append: later appends fail until history() is read.
        self._poisoned: set[TrialKey] = set()
        self._wakeup = anyio.Event()
        self._users = 0  # runs (or commands) holding the store open
        self._open_lock: anyio.Lock | None = None

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    # -- lifecycle ---------------------------------------------------------

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[None]:
        """Open the store for as long as the block runs; several runs may share it.

        The first user connects and the last one out disconnects. Every user runs
        a flush loop of its own; they share one batch queue, so whichever is awake
        writes the next batch, and a user that leaves never strands another's
        appends.
        """
        if self._open_lock is None:
            self._open_lock = anyio.Lock()
        async with self._open_lock:
            if not self._users:
                await anyio.to_thread.run_sync(self._connect, limiter=self._write_limiter)
                self._batch = _Batch()
                self._wakeup = anyio.Event()
                self._failed = None
            self._users += 1
        try:
            with unwrap_single():
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._flush_loop)
                    try:
                        yield
                    finally:
                        tg.cancel_scope.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                # What was handed over is written even when the run was cancelled
                # (Ctrl-C): only a kill loses appends nobody was told had landed.
                for batch in list(self._inflight):
                    await batch.done.wait()
                if self._batch.requests and self._writer is not None and not self._failed:
                    await self._write_next()
                async with self._open_lock:
                    self._users -= 1
                    if not self._users:
                        await anyio.to_thread.run_sync(
                            self._disconnect, limiter=self._write_limiter
                        )

    def _connect(self) -> None:
        if self.path.is_dir():
            raise ConfigError(f"store path {str(self.path)!r} is a directory, not a file")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            writer = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"store path {str(self.path)!r} cannot be created: {exc}") from exc
        try:
            writer.execute("PRAGMA busy_timeout = 10000")
            mode = writer.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(f"{self.path}: could not switch to WAL (got {mode})")
            writer.execute(f"PRAGMA synchronous = {self.synchronous}")
            writer.executescript(_SCHEMA)
            writer.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            version = writer.execute(
                "SELECT value FROM meta WHERE key = 'schema_version'"
            ).fetchone()[0]
        except sqlite3.DatabaseError as exc:
            writer.close()
            raise ConfigError(
                f"store path {str(self.path)!r} is not a Corral SQLite store: {exc}"
            ) from exc
        if int(version) != SCHEMA_VERSION:
            writer.close()
            raise StoreError(f"{self.path}: schema version {version}, expected {SCHEMA_VERSION}")
        reader = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        reader.execute("PRAGMA busy_timeout = 10000")
        self._writer, self._reader = writer, reader

    def _disconnect(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                conn.close()
        self._writer = self._reader = None

    # -- writing -----------------------------------------------------------

    async def _flush_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            if not self._batch.requests:  # another user's loop took it
                if self._wakeup.is_set():
                    self._wakeup = anyio.Event()
                continue
            await self._write_next()

    async def _write_next(self) -> None:
        batch, self._batch = self._batch, _Batch()
        self._inflight.add(batch)
        self._wakeup = anyio.Event()
        try:
            if self._failed is not None:  # appends land in order: none after a lost one
                raise StoreError(f"{self!r}: an earlier batch failed: {self._failed}")
            # Shielded: a batch taken off the queue is written, even when the run is
            # cancelled before its thread starts (a cancel never drops an append).
            with anyio.CancelScope(shield=True):
                batch.errors = await anyio.to_thread.run_sync(
                    self._write_batch, batch.requests, limiter=self._write_limiter
                )
        except BaseException as exc:  # the whole batch failed: every appender hears it
            batch.errors = [exc] * len(batch.requests)
            if self._failed is None:
                self._failed = exc
            raise
        finally:
            self._inflight.discard(batch)
            batch.done.set()

    def enqueue(self, key: TrialKey, commits: Sequence[Commit]) -> _Slot:
        if self._writer is None:
            raise StoreError(f"{self!r} is not open")
        batch = self._batch
        batch.requests.append((key, [_row(key, c) for c in commits]))
        self._wakeup.set()
        return _Slot(self, batch, len(batch.requests) - 1)

    async def append(self, key: TrialKey, commits: Sequence[Commit]) -> None:
        await self.enqueue(key, commits).wait()

    def _write_batch(self, requests: list[_Request]) -> list[BaseException | None]:
        conn = self._writer
        assert conn is not None
        if self._poisoned and any(key in self._poisoned for key, _ in requests):
            return self._write_one_by_one(requests)
        rows = [row for _, rows in requests for row in rows]
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(_INSERT, rows)
            except sqlite3.IntegrityError:
                conn.execute("ROLLBACK")
                return self._write_one_by_one(requests)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StoreError(f"{self!r}: {exc}") from exc
        return [None] * len(requests)

    def _write_one_by_one(self, requests: list[_Request]) -> list[BaseException | None]:
        # Slow path after a conflict: only the request that raced fails.
        conn = self._writer
        assert conn is not None
        errors: list[BaseException | None] = []
        for key, rows in requests:
            if key in self._poisoned:
                errors.append(CommitConflictError(f"{key}: an earlier append of this trial failed"))
                continue
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(_INSERT, rows)
            except sqlite3.IntegrityError as exc:
                conn.execute("ROLLBACK")
                self._poisoned.add(key)
                errors.append(
                    CommitConflictError(
                        f"{key}: sequence number {[row[3] for row in rows]} already taken ({exc})"
                    )
                )
                continue
            conn.execute("COMMIT")
            errors.append(None)
        return errors

    @asynccontextmanager
    async def claim(self, benchmark_id: str) -> AsyncIterator[None]:
        """An exclusive ``flock`` on a lock file beside the store, one per benchmark.

        The kernel drops it when the holder exits, however it exits, so a kill -9
        leaves no stale claim; another open file description (another runner in
        this process, or another process) is refused at once.
        """
        digest = hashlib.sha256(benchmark_id.encode()).hexdigest()[:24]
        path = self.path.with_name(self.path.name + ".locks") / f"{digest}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
                raise BenchmarkBusyError(
                    f"benchmark {benchmark_id!r} is being run by another live runner "
                    f"({holder or 'unknown holder'}); wait for it to finish or stop it"
                ) from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    async def register_benchmark(self, benchmark_id: str, config: Mapping[str, Any]) -> bool:
        return await anyio.to_thread.run_sync(
            self._register, benchmark_id, dict(config), limiter=self._write_limiter
        )

    def _register(self, benchmark_id: str, config: dict[str, Any]) -> bool:
        conn = self._writer
        if conn is None:
            raise StoreError(f"{self!r} is not open")
        row = conn.execute(
            "SELECT config FROM benchmarks WHERE benchmark_id = ?", (benchmark_id,)
        ).fetchone()
        if row is not None:
            check_same_config(benchmark_id, loads(row[0]), config)
            return True
        conn.execute(
            "INSERT INTO benchmarks (benchmark_id, config, created_at) VALUES (?, ?, ?)",
            (benchmark_id, dumps(config), time.time()),
        )
        return False

    # -- reading -----------------------------------------------------------

    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        def run() -> list[tuple[Any, ...]]:
            if self._reader is None:
                raise StoreError(f"{self!r} is not open")
            try:
                return self._reader.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"{self!r}: {exc}") from exc

        return await anyio.to_thread.run_sync(run, limiter=self._read_limiter)

    async def _settle(self) -> None:
        """Wait until every append handed to the store so far has landed or failed.

        A reader then sees its own writes, including those of an append whose
        caller was cancelled while it waited for the acknowledgement.
        """
        for batch in [*self._inflight, self._batch]:
            if batch.requests:
                await batch.done.wait()

    async def history(self, key: TrialKey) -> list[Commit]:
        await self._settle()
        self._poisoned.discard(key)
        rows = await self._read(
            "SELECT seq, kind, payload, created_at, input_tokens, output_tokens, cost "
            "FROM commits WHERE benchmark_id = ? AND task_id = ? AND trial = ? ORDER BY seq",
            tuple(key),
        )
        return [_commit(row) for row in rows]

    async def summaries(self, benchmark_id: str) -> list[TrialSummary]:
        return [s async for chunk in self.scan(benchmark_id) for s in chunk]

    async def scan(self, benchmark_id: str, chunk: int = 4096) -> AsyncIterator[list[TrialSummary]]:
        """One pass in key order over the benchmark's commits, a chunk of rows at a time.

        Only terminal and evaluation payloads are read; the rest count toward
        usage and the commit count.
        """
        await self._settle()
        reader = self._reader
        if reader is None:
            raise StoreError(f"{self!r} is not open")
        cursor = await anyio.to_thread.run_sync(
            reader.execute, _SCAN, (benchmark_id,), limiter=self._read_limiter
        )
        try:
            builder: SummaryBuilder | None = None
            while rows := await anyio.to_thread.run_sync(
                cursor.fetchmany, chunk, limiter=self._read_limiter
            ):
                out = []
                for task_id, trial, seq, kind, payload, created, tin, tout, cost in rows:
                    if builder is None or builder.trial != trial or builder.task_id != task_id:
                        if builder is not None:
                            out.append(builder.build())
                        builder = SummaryBuilder(task_id, trial)
                    usage = Usage(tin, tout, cost) if (tin or tout or cost) else NO_USAGE
                    body = loads(payload) if payload is not None else None
                    builder.add(Commit(seq, kind, body, created, usage))
                yield out
            if builder is not None:
                yield [builder.build()]
        finally:
            cursor.close()

    async def benchmark_config(self, benchmark_id: str) -> Mapping[str, Any] | None:
        rows = await self._read(
            "SELECT config FROM benchmarks WHERE benchmark_id = ?", (benchmark_id,)
        )
        return loads(rows[0][0]) if rows else None

    async def benchmarks(self) -> list[BenchmarkInfo]:
        rows = await self._read(
            "SELECT b.benchmark_id, b.created_at, b.config, "
            "(SELECT COUNT(*) FROM commits c WHERE c.benchmark_id = b.benchmark_id "
            "AND c.kind = 'terminal') FROM benchmarks b ORDER BY b.created_at",
            (),
        )
        out = []
        for benchmark_id, created, config_text, finished in rows:
            out.append(BenchmarkInfo.of(benchmark_id, created, loads(config_text), finished))
        return out


def _row(key: TrialKey, c: Commit) -> tuple[Any, ...]:
    u = c.usage
    return (
        *key,
        c.seq,
        c.kind,
        dumps(c.payload),
        c.created_at,
        u.input_tokens,
        u.output_tokens,
        u.cost,
    )


def _commit(row: tuple[Any, ...]) -> Commit:
    seq, kind, payload, created, tin, tout, cost = row
    usage = Usage(tin, tout, cost) if (tin or tout or cost) else Usage()
    return Commit(seq=seq, kind=kind, payload=loads(payload), created_at=created, usage=usage)
