"""The embedded default store: SQLite in WAL mode, one writer committing in batches.

Appends from every running trial are gathered into the next batch while the
previous one is being written; a batch is one transaction, and an append is
acknowledged only after that transaction has committed. The writer and the
reader each have a connection of their own (WAL lets them run side by side),
and each connection is touched by one thread at a time (`Owned`), even when
asyncio's ``Task.cancel()`` abandons a worker thread mid-call.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import math
import os
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from itertools import chain
from pathlib import Path
from tempfile import TemporaryFile
from typing import IO, Any, Literal, TypeVar

import anyio

from .._checks import file_path, flag
from .._errors import (
    BenchmarkBusyError,
    CommitConflictError,
    ConfigError,
    StoreCorrupt,
    StoreError,
)
from .._json import dumps
from .._types import Commit
from ..history import PIECE, ConfigStream, StoredConfigText
from ._batching import Batch, Slot, WriteBatch, WriterThread, surely
from ._config_diff import check_same_config, check_same_stream
from ._decode import (
    check_created,
    check_unbroken,
    corrupt,
    decode_benchmark,
    decode_commit,
    decode_run,
)
from ._heads import (
    HEAD_COLUMNS,
    BenchmarkOverview,
    CountedConfig,
    OpenFolds,
    RebuildProgress,
    TaskList,
    TrialHead,
    checked_overview,
    count_done,
    decode_head,
    folded_heads,
    headed,
    sum_written,
    task_list_of_pieces,
    utf8_pieces,
)
from ._protocol import (
    BenchmarkInfo,
    HostAccess,
    TrialKey,
    TrialSummary,
    check_handed,
    check_payloads,
)
from ._runs import RunRecord
from ._sqlite_file import (
    SCHEMA_VERSION,
    Identity,
    check_file,
    check_still_there,
    claims_folder,
    connect,
    identity,
    open_error,
    renewed,
    settle_home,
    store_error,
    write_transaction,
)
from ._sqlite_thread import Owned, in_thread
from ._summary import RowFolder, check_heads_met, checked_history

T = TypeVar("T")

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
CREATE TABLE IF NOT EXISTS runs (
    benchmark_id TEXT NOT NULL,
    run INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (benchmark_id, run)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS trial_heads (
    benchmark_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    trial INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    done INTEGER NOT NULL,
    status TEXT,
    passed INTEGER NOT NULL,
    score REAL,
    scores TEXT,
    error TEXT,
    evaluation_error TEXT,
    attempts INTEGER NOT NULL,
    commits INTEGER NOT NULL,
    started_at REAL,
    finished_at REAL,
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost REAL NOT NULL,
    limit_name TEXT,
    working_time REAL,
    model_calls TEXT,
    PRIMARY KEY (benchmark_id, task_id, trial)
) WITHOUT ROWID;
"""


def _statements(head: str, columns: int, most: int) -> tuple[str, ...]:
    """``head`` with the values of 1, 2, 4 ... ``most`` rows of one benchmark: its id, the
    first parameter, bound once for every row (`insert_rows`), then ``columns`` more."""
    row = f"(?1{', ?' * columns})"
    return tuple(f"{head} VALUES {', '.join([row] * (1 << i))}" for i in range(most.bit_length()))


#: `insert_rows`' statements of a batch's heads: 32 rows of 20 are 641 parameters with the
#: benchmark id, within the 999 of SQLite's oldest limit.
_PUT_HEADS = _statements(
    f"INSERT OR REPLACE INTO trial_heads (benchmark_id, {HEAD_COLUMNS})",
    HEAD_COLUMNS.count(",") + 1,
    32,
)
_PUT_HEAD = _PUT_HEADS[0]
#: A head row's missing value (`TrialHead.row`): NaN, which SQLite stores as NULL, as it
#: does None. The sqlite3 module binds a float as it is, but adapts every None it binds
#: (a lookup that fails, some 3,500 instructions, on the writer thread holding the GIL:
#: five times in a finished trial's head).
NULL = math.nan
_HEADS_FIRST = (
    f"SELECT {HEAD_COLUMNS} FROM trial_heads WHERE benchmark_id = ? ORDER BY task_id, trial LIMIT ?"
)
_HEADS_NEXT = (
    f"SELECT {HEAD_COLUMNS} FROM trial_heads WHERE benchmark_id = ? "
    "AND (task_id, trial) > (?, ?) ORDER BY task_id, trial LIMIT ?"
)
# Each benchmark's trials per task and task count; its tasks that are not as Corral
# writes them are counted (any: the caller reads it whole, which says what is wrong).
_OVERVIEW = (
    "SELECT benchmark_id, created_at, json_extract(config, '$.trials_per_task'), "
    "(SELECT count(*) FROM json_each(config, '$.tasks')), "
    "json_type(config, '$.tasks') IS NOT 'object' OR EXISTS (SELECT 1 FROM "
    "json_each(config, '$.tasks') t WHERE t.type IS NOT 'object' "
    "OR json_type(t.value, '$.environment_id') IS NOT 'text' "
    "OR coalesce(json_type(t.value, '$.model'), 'null') NOT IN ('text', 'null')) "
    "FROM benchmarks ORDER BY created_at"
)
_ROWID = "SELECT rowid FROM benchmarks WHERE benchmark_id = ?"
_HEAD_SEQS = "SELECT task_id, trial, next_seq FROM trial_heads WHERE benchmark_id = ? "
_HEAD_SEQ = "SELECT next_seq FROM trial_heads WHERE benchmark_id = ? AND task_id = ? AND trial = ?"
_DONE = "SELECT COUNT(*) FROM trial_heads WHERE benchmark_id = ? AND done AND trial < ?"
_WRITTEN = "SELECT COALESCE(SUM(next_seq), 0) FROM trial_heads WHERE benchmark_id = ?"

#: `insert_rows`' statements of a batch's commits (64 rows of 9 parameters, and the id).
_INSERTS = _statements(
    "INSERT INTO commits (benchmark_id, task_id, trial, seq, kind, payload, created_at, "
    "input_tokens, output_tokens, cost)",
    9,
    64,
)

# Run records are numbered per benchmark in the order they were recorded.
#: A record already there (byte for byte: a retried call) is not recorded again.
_INSERT_RUN = (
    "INSERT INTO runs (benchmark_id, run, record) "
    "SELECT ?, COALESCE(MAX(run), 0) + 1, ? FROM runs WHERE benchmark_id = ? "
    "HAVING COALESCE(SUM(record = ?), 0) = 0"
)
_RUNS = "SELECT record FROM runs WHERE benchmark_id = ? ORDER BY run"
_HAS_RUNS = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'"

Synchronous = Literal["OFF", "NORMAL", "FULL", "EXTRA"]

# Keyset pages: each chunk is one short statement, run and finished on one thread,
# so no cursor (nor the read transaction it holds open) outlives a worker call.
_SCAN_COLUMNS = (
    "SELECT task_id, trial, seq, kind, "
    "CASE WHEN kind IN ('terminal', 'evaluation') THEN payload END, "
    "created_at, input_tokens, output_tokens, cost FROM commits WHERE benchmark_id = ? "
)
_SCAN_FIRST = _SCAN_COLUMNS + "ORDER BY task_id, trial, seq LIMIT ?"
_SCAN_NEXT = (
    _SCAN_COLUMNS + "AND (task_id, trial, seq) > (?, ?, ?) ORDER BY task_id, trial, seq LIMIT ?"
)
_SCAN_TRIAL = _SCAN_COLUMNS + "AND task_id = ? AND trial = ? ORDER BY seq"

# A trial is finished when its latest terminal commit comes after its latest
# reopening (a rerun gives a finished trial a fresh attempt), as a resume decides.
_BENCHMARKS = """
WITH ends AS (
    SELECT benchmark_id,
        MAX(CASE WHEN kind = 'terminal' THEN seq END) AS terminal,
        MAX(CASE WHEN kind = 'reopen' THEN seq END) AS reopen
    FROM commits WHERE kind IN ('terminal', 'reopen')
    GROUP BY benchmark_id, task_id, trial
)
SELECT b.benchmark_id, b.created_at, b.config,
    (SELECT COUNT(*) FROM ends e WHERE e.benchmark_id = b.benchmark_id
        AND e.terminal IS NOT NULL AND (e.reopen IS NULL OR e.terminal > e.reopen))
FROM benchmarks b ORDER BY b.created_at
"""

# Rows are encoded when handed over, so a payload mutated afterwards (a session's
# state changed in place) cannot rewrite what is recorded.
_Request = tuple[TrialKey, list[tuple[Any, ...]], Sequence[Commit]]


class SQLiteStore:
    """Commit histories in one SQLite file (WAL).

    ``synchronous="NORMAL"`` (the default) makes every acknowledged commit
    survive a crash or kill of the process; ``"FULL"`` also survives a power
    loss or OS crash, at the price of an fsync per batch; ``"OFF"`` hands commits to
    the OS unsynced (a kill of the process keeps them, a power loss may not: for
    throwaway stores, such as a benchmark's fixtures). ``read_only=True``
    opens an existing store for reading only (history, summaries, scan,
    benchmarks, benchmark_config), even a file or folder the process cannot
    write; it never changes the file. ``create=False``: the store is written but
    must exist (opening a missing or empty file is a `ConfigError`, nothing made).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: Synchronous = "NORMAL",
        read_only: bool = False,
        create: bool = True,
    ):
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ConfigError(
                f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}"
            )
        self.path = file_path("path", path)
        self.synchronous = synchronous
        self.read_only = flag("read_only", read_only)
        self._create = flag("create", create) and not read_only
        self._label = f"store {str(self.path)!r}"  # how a `StoreCorrupt` names it
        self._writer: Owned | None = None
        self._reader: Owned | None = None
        self._identity: Identity | None = None
        self._home: Path | None = None  # where claims are kept (see `settle_home`)
        self._queue: WriterThread[_Request] = WriterThread(repr(self), self._record_batch)
        # Trials with a failed append: later appends fail until history() is read.
        self._poisoned: set[TrialKey] = set()
        # The writer's folds of the trials it writes (their heads made from them).
        self._folds = OpenFolds()
        # False for a store written before heads were kept, opened read-only: its
        # heads are folded from the commits when asked (nothing is written).
        self._has_heads = True

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    def host_access(self, benchmark_id: str) -> HostAccess:
        """Processes on this machine open the file; the coordinator's file lock covers them."""
        options = (("synchronous", self.synchronous),)
        return HostAccess(str(self.path.absolute()), options, "machine")

    @asynccontextmanager
    async def joined(
        self, benchmark_id: str, epoch: int, host: int | None = None
    ) -> AsyncIterator[None]:
        """Nothing to join: the claim is the coordinator's file lock, and hosts write
        beside it without taking it."""
        yield

    async def fence_host(self, benchmark_id: str, host: int) -> None:
        """Nothing to fence: the hosts of a file store run on this machine, where a host
        Ray says died has been killed (no network stands between them)."""

    # -- lifecycle ---------------------------------------------------------

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[None]:
        """Open the store for as long as the block runs; several runs may share it.

        The first user connects and starts the writer thread, and the last one out
        stops it and disconnects; every user's appends go to the one thread, so a
        user that leaves never strands another's appends.
        """
        async with self._queue.used(self._connect, self._disconnect, writes=not self.read_only):
            yield

    async def _connect(self) -> None:
        self._folds.clear()  # another process may have written since this one did
        made: list[sqlite3.Connection] = []  # filled on the thread, kept if we are cancelled
        try:
            await in_thread(lambda: self._open_connections(made))
        except BaseException:  # failed, or cancelled: close what was opened
            with anyio.CancelScope(shield=True):
                for conn in made:
                    await Owned(conn).close()
            raise
        # A file read as it is (a folder it may not write) is read anew once a writer came.
        self._reader = Owned(made[0], functools.partial(renewed, self.path))
        self._writer = None if self.read_only else Owned(made[1])

    def _open_connections(self, made: list[sqlite3.Connection]) -> None:
        """Open the reader (then the writer) into ``made``; check before changing anything."""
        is_store = check_file(self.path, must_exist=not self._create, writing=not self.read_only)
        if not self.read_only:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                made.append(connect(self.path, read_only=False))
            except (OSError, sqlite3.Error) as exc:
                raise ConfigError(
                    f"store path {str(self.path)!r} cannot be created: {exc}"
                ) from exc
        try:
            if not self.read_only:
                self._prepare(made[0], new=not is_store)
            reader = connect(self.path, read_only=self.read_only)
        except (OSError, sqlite3.Error) as exc:
            raise open_error(self.path, exc) from exc
        if self.read_only:
            reader.execute("PRAGMA query_only = ON")
            self._has_heads = _version(reader) == str(SCHEMA_VERSION)
        made.insert(0, reader)
        self._identity = identity(self.path)

    def _prepare(self, writer: sqlite3.Connection, *, new: bool) -> None:
        mode = writer.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise StoreError(f"store {str(self.path)!r} could not switch to WAL (got {mode})")
        writer.execute(f"PRAGMA synchronous = {self.synchronous}")
        # One transaction: a crash never leaves half a schema behind. A store of an
        # older version only gains the tables it lacks (IF NOT EXISTS): nothing in it
        # changes.
        if new or _version(writer) != str(SCHEMA_VERSION):
            with write_transaction(writer):
                older = None if new else _version(writer)
                if older != str(SCHEMA_VERSION):  # another writer may have been first
                    for statement in _SCHEMA.split(";"):
                        if statement.strip():
                            writer.execute(statement)
                    if older is not None:
                        # Written before heads were kept: they are folded once, here.
                        rebuild_heads(writer, self._label)
                    writer.execute(
                        "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                        (str(SCHEMA_VERSION),),
                    )
        with write_transaction(writer):
            _keep_overviews(writer)
        self._home = settle_home(writer, self.path)
        self._configure_writer(writer)

    def _configure_writer(self, writer: sqlite3.Connection) -> None:
        """A hook for tests (a small ``max_page_count`` plays a full disk)."""

    async def _disconnect(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._writer = self._reader = None

    def _refuse_write(self, what: str) -> StoreError:
        return StoreError(f"store {str(self.path)!r} was opened read-only: cannot {what}")

    # -- writing -----------------------------------------------------------

    def _record_batch(self, batch: Batch[_Request]) -> None:
        """Write a batch, on the writer thread, alone in the writer's connection."""
        writer = self._writer
        if writer is None:
            raise StoreError(f"{self!r} is not open")
        writer.here(lambda conn: batch.record(self._writer_of(conn), self._translate))

    def _writer_of(self, conn: sqlite3.Connection) -> WriteBatch[_Request]:
        return lambda requests: self._write_batch(conn, requests)

    def _translate(self, exc: Exception) -> StoreError:
        return store_error(self.path, exc)

    def enqueue(self, key: TrialKey, commits: Sequence[Commit]) -> Slot[_Request]:
        if self.read_only:
            raise self._refuse_write("append commits")
        if self._writer is None:
            raise StoreError(f"{self!r} is not open")
        check_handed(key, commits)
        # Each commit's row (`_INSERTS`' columns after the benchmark id), built inline: a
        # call per commit costs (and so does unpacking the key into each). A loop, not a
        # list comprehension: before Python 3.12 that is a function made and called per
        # append, and nearly every append is of one commit.
        _, task_id, trial = key
        rows: list[tuple[Any, ...]] = []
        for c in commits:
            usage = c.usage
            rows.append(
                (
                    task_id,
                    trial,
                    c.seq,
                    c.kind,
                    dumps(c.payload),
                    c.created_at,
                    usage.input_tokens,
                    usage.output_tokens,
                    usage.cost,
                )
            )
        return self._queue.put((key, rows, commits))

    async def append(self, key: TrialKey, commits: Sequence[Commit]) -> None:
        check_payloads(key, commits)
        await self.enqueue(key, commits).wait()

    def _write_batch(
        self, conn: sqlite3.Connection, requests: list[_Request]
    ) -> list[BaseException | None]:
        assert self._identity is not None
        check_still_there(self.path, self._identity)
        if self._poisoned and any(key in self._poisoned for key, _, _ in requests):
            return self._write_one_by_one(conn, requests)
        try:
            with write_transaction(conn):
                appends = ((key, rows) for key, rows, _ in requests)
                for benchmark_id, rows in _by_benchmark(appends).items():
                    insert_rows(conn, _INSERTS, benchmark_id, rows)
                self._put_heads(conn, requests)
        except sqlite3.IntegrityError:
            self._folds.clear()
            return self._write_one_by_one(conn, requests)
        except BaseException:
            self._folds.clear()
            raise
        return [None] * len(requests)

    def _put_heads(self, conn: sqlite3.Connection, requests: list[_Request]) -> None:
        """Write the head of every trial these appends change, in their transaction:
        from the writer's fold of the trial, else refolded from the store."""
        made: dict[TrialKey, tuple[tuple[Any, ...]]] = {}  # appended to twice: its last
        refold: dict[TrialKey, None] = {}
        for key, _, commits in requests:
            known, head = self._folds.heads(key, commits)
            if not known:
                refold[key] = None
            elif head is not None:
                made[key] = (head.row(NULL),)
        for key in refold:  # a trial refolded has no head of its own (as PostgreSQL's)
            made.pop(key, None)
        for benchmark_id, rows in _by_benchmark(made.items()).items():
            insert_rows(conn, _PUT_HEADS, benchmark_id, rows)
        for key in refold:  # folded from the store, this batch's rows included
            put_head(conn, self._label, key)

    def _write_one_by_one(
        self, conn: sqlite3.Connection, requests: list[_Request]
    ) -> list[BaseException | None]:
        # Slow path after a conflict: only the request that raced fails.
        errors: list[BaseException | None] = []
        self._folds.clear()  # what a failed batch applied may not have landed
        for key, rows, commits in requests:
            if key in self._poisoned:
                errors.append(CommitConflictError(f"{key}: an earlier append of this trial failed"))
                continue
            try:
                with write_transaction(conn):
                    insert_rows(conn, _INSERTS, key.benchmark_id, rows)
                    self._put_heads(conn, [(key, rows, commits)])
            except sqlite3.IntegrityError as exc:
                self._poisoned.add(key)
                errors.append(
                    CommitConflictError(
                        f"{key}: sequence number {[row[2] for row in rows]} already taken ({exc})"
                    )
                )
                continue
            errors.append(None)
        return errors

    @asynccontextmanager
    async def claim(self, benchmark_id: str) -> AsyncIterator[None]:
        """An exclusive ``flock`` on a lock file per benchmark and store file.

        The lock file is named by the store file's device and inode, in a folder
        beside the file's home (`settle_home`: the real path it was first written
        at), so a symlink, ``dir/../store.db`` or a hard link in any folder reaches
        the same lock. The kernel drops it
        when the holder exits, however it exits, so a kill -9 leaves no stale
        claim; another open file description (another runner in this process,
        or another process) is refused at once.
        """
        if self.read_only:
            raise self._refuse_write(f"run benchmark {benchmark_id!r}")
        folder, found = claims_folder(self.path, self._home)
        digest = hashlib.sha256(benchmark_id.encode()).hexdigest()[:24]
        path = folder / f"{found.device}-{found.inode}-{digest}.lock"
        try:
            folder.mkdir(exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise store_error(path, exc) from exc
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
                raise BenchmarkBusyError(
                    f"benchmark {benchmark_id!r} is being run by another live runner "
                    f"({holder or 'unknown holder'}); wait for it to finish or stop it"
                ) from None
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
            except OSError as exc:
                raise store_error(path, exc) from exc
            yield
        finally:
            try:
                await surely(self._queue.settle)  # what the claim's holder handed over first
            finally:
                os.close(fd)  # closing the descriptor releases the lock

    async def register_benchmark(
        self,
        benchmark_id: str,
        config: Mapping[str, Any] | ConfigStream,
        *,
        created_at: float | None = None,
    ) -> bool:
        if self.read_only:
            raise self._refuse_write(f"register benchmark {benchmark_id!r}")
        stream = ConfigStream.of(config)
        created = time.time() if created_at is None else created_at
        return await self._use(
            self._writer, lambda conn: self._register(conn, benchmark_id, stream, created)
        )

    def _register(
        self, conn: sqlite3.Connection, benchmark_id: str, config: ConfigStream, created: float
    ) -> bool:
        """Compare with the stored configuration, or store this one, in pieces: the
        text is written into a value of its length and read back a piece at a time."""
        row = conn.execute(
            "SELECT rowid, typeof(config), created_at FROM benchmarks WHERE benchmark_id = ?",
            (benchmark_id,),
        ).fetchone()
        if row is not None:
            rowid, kind, stored_at = row

            def whole() -> Mapping[str, Any]:
                found = conn.execute(
                    "SELECT config, created_at FROM benchmarks WHERE rowid = ?", (rowid,)
                ).fetchone()
                return decode_benchmark(self._label, benchmark_id, *found)[2]

            check_created(self._label, benchmark_id, stored_at)
            if kind != "text":
                check_same_config(benchmark_id, whole(), config.as_dict())
                return True
            with conn.blobopen("benchmarks", "config", rowid, readonly=True) as blob:
                check_same_stream(benchmark_id, StoredConfigText(_read_text(blob)), config, whole)
            return True
        if conn.execute(
            "SELECT 1 FROM commits WHERE benchmark_id = ? LIMIT 1", (benchmark_id,)
        ).fetchone():
            # Its row was changed or deleted: a fresh start would collide with its commits.
            raise corrupt(self._label, benchmark_id, "it has commits but no configuration")
        counted, digest = CountedConfig(config), hashlib.md5(usedforsecurity=False)
        try:
            spilled, size = self._spill(counted.text(), digest)
        except OSError as exc:
            raise store_error(self.path, exc) from exc
        with spilled, write_transaction(conn):
            rowid = conn.execute(
                "INSERT INTO benchmarks (benchmark_id, config, created_at) "
                "VALUES (?, CAST(zeroblob(?) AS TEXT), ?)",
                (benchmark_id, size, created),
            ).lastrowid
            assert rowid is not None
            with conn.blobopen("benchmarks", "config", rowid) as blob:
                while data := spilled.read(PIECE):
                    blob.write(data)
            if counted.overview is not None:
                _keep_overview(conn, benchmark_id, digest.hexdigest(), *counted.overview)
        return False

    def _spill(self, pieces: Iterator[str], digest: Any) -> tuple[IO[bytes], int]:
        """The configuration's text, made once, in a nameless file beside the store
        (whose disk must hold it anyway; not memory: a million tasks' metadata),
        hashed into ``digest``: its value is written at its length, which made the
        text twice when it was counted first (half of a registration's cost). Returns
        the file, at its start, and the text's length in bytes. Its buffer is flushed
        here: a full disk that refuses the last bytes is an `OSError` of the spill (a
        `StoreError` before anything is registered), not of the reading back. Beside
        the real file, where SQLite writes its own (a symlink's folder may take none,
        or be on another disk)."""
        assert self._identity is not None  # (open)
        spilled = TemporaryFile(prefix=".corral-config-", dir=self._identity.directory)
        try:
            for piece in pieces:
                data = piece.encode()
                digest.update(data)
                spilled.write(data)
            spilled.flush()
            size = spilled.tell()
            spilled.seek(0)
        except BaseException:
            try:
                spilled.close()
            except OSError:  # flushing what it holds, on that same full disk
                pass
            raise
        return spilled, size

    async def record_run(self, benchmark_id: str, record: RunRecord) -> None:
        if self.read_only:
            raise self._refuse_write(f"record a run of {benchmark_id!r}")
        await self._queue.settle()
        text = dumps(record.to_dict())

        def insert(conn: sqlite3.Connection) -> None:
            with write_transaction(conn):
                conn.execute(_INSERT_RUN, (benchmark_id, text, benchmark_id, text))

        await self._use(self._writer, insert)

    # -- reading -----------------------------------------------------------

    async def _use(self, owned: Owned | None, func: Callable[[sqlite3.Connection], T]) -> T:
        """``func(connection)`` on a worker thread, its SQLite errors as one `StoreError`."""
        if owned is None:
            raise StoreError(f"{self!r} is not open")

        def run(conn: sqlite3.Connection) -> T:
            try:
                return func(conn)
            except sqlite3.Error as exc:
                raise store_error(self.path, exc) from exc

        return await owned.call(run)

    async def _read(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return await self._use(self._reader, lambda conn: conn.execute(sql, params).fetchall())

    async def history(self, key: TrialKey) -> list[Commit]:
        await self._queue.settle()
        self._poisoned.discard(key)
        rows = await self._read(
            "SELECT seq, kind, payload, created_at, input_tokens, output_tokens, cost "
            "FROM commits WHERE benchmark_id = ? AND task_id = ? AND trial = ? ORDER BY seq",
            tuple(key),
        )
        where = self._label
        commits = [decode_commit(where, key.benchmark_id, key.task_id, key.trial, r) for r in rows]
        check_unbroken(where, key, commits)
        return commits

    async def checked_history(self, key: TrialKey) -> list[Commit]:
        """`history`, checked against its head read first (`checked_history`)."""
        heads = await self._read(_HEAD_SEQ, tuple(key)) if self._has_heads else []
        return checked_history(self._label, key, await self.history(key), heads)

    async def summaries(self, benchmark_id: str) -> list[TrialSummary]:
        return [s async for chunk in self.scan(benchmark_id) for s in chunk]

    async def scan(self, benchmark_id: str, chunk: int = 4096) -> AsyncIterator[list[TrialSummary]]:
        """One pass in key order over the benchmark's commits, a chunk of rows at a time.

        Only terminal and evaluation payloads are read; the rest count toward
        usage and the commit count. Each chunk is read afresh after the last key
        of the one before, so commits appended meanwhile may be seen (a trial's
        history only grows), and nothing stays open between chunks.
        """
        await self._queue.settle()
        folder = RowFolder(self._label, benchmark_id)
        after: tuple[Any, ...] | None = None
        while True:
            if after is None:
                rows = await self._read(_SCAN_FIRST, (benchmark_id, chunk))
            else:
                rows = await self._read(_SCAN_NEXT, (benchmark_id, *after, chunk))
            if not rows:
                break
            after = rows[-1][:3]
            if out := folder.fold(rows):
                yield out
            if len(rows) < chunk:
                break
        if rest := folder.rest():
            yield rest

    async def heads(self, benchmark_id: str, chunk: int = 2048) -> AsyncIterator[list[TrialHead]]:
        """Every kept head of the benchmark, in (task id, trial) order, a chunk at a time
        (a store written before heads were kept, opened read-only: folded from its
        commits, in memory)."""
        await self._queue.settle()
        if not self._has_heads:
            async for summaries in self.scan(benchmark_id):
                yield headed(summaries)
            return
        label = self._label
        after: tuple[Any, ...] | None = None
        while True:
            if after is None:
                rows = await self._read(_HEADS_FIRST, (benchmark_id, chunk))
            else:
                rows = await self._read(_HEADS_NEXT, (benchmark_id, *after, chunk))
            if not rows:
                break
            after = rows[-1][:2]
            yield [decode_head(label, benchmark_id, row) for row in rows]
            if len(rows) < chunk:
                break

    async def finished_trials(self, benchmark_id: str, trials_per_task: int) -> int:
        """Trials finished as a report counts them (`TrialHead.done`)."""
        if not self._has_heads:
            return await count_done(self.heads(benchmark_id), trials_per_task)
        rows = await self._read(_DONE, (benchmark_id, trials_per_task))
        return int(rows[0][0])

    async def heads_written(self, benchmark_id: str) -> int:
        if not self._has_heads:
            return await sum_written(self.heads(benchmark_id))
        rows = await self._read(_WRITTEN, (benchmark_id,))
        return int(rows[0][0])

    async def task_list(self, benchmark_id: str) -> TaskList | None:
        """Read a piece at a time (`task_list_of_pieces`): the configuration's text is
        never held whole."""

        def read(conn: sqlite3.Connection) -> TaskList | None:
            found = conn.execute(_ROWID, (benchmark_id,)).fetchone()
            if found is None:
                return None
            try:
                blob = conn.blobopen("benchmarks", "config", found[0], readonly=True)
            except sqlite3.OperationalError:  # not text: read whole, it says what it is
                return None
            with blob:
                return task_list_of_pieces(_read_text(blob))

        return await self._use(self._reader, read)

    async def overview(self) -> list[BenchmarkOverview] | None:
        """Each benchmark's overview as written with its configuration, where that is
        unchanged since (its digest); the others' read from their configurations."""

        def read(conn: sqlite3.Connection) -> list[BenchmarkOverview] | None:
            try:
                return checked_overview(_overview_rows(conn))
            except sqlite3.OperationalError:  # not JSON: read whole, it says so
                return None

        return await self._use(self._reader, read)

    def reader(self) -> SQLiteStore:
        """The same file, opened read-only (from any thread or event loop)."""
        return SQLiteStore(self.path, read_only=True)

    async def task_summaries(
        self, benchmark_id: str, task_ids: Sequence[str]
    ) -> list[TrialSummary]:
        """The summaries of these tasks' trials, folded from their commits; checked
        against their heads, read first (`check_heads_met`: each read, in a transaction
        of its own, sees what was committed when it began, so the next sees every
        commit the heads were made from)."""
        await self._queue.settle()
        marks = f"AND task_id IN ({', '.join('?' * len(task_ids))}) "
        params = (benchmark_id, *task_ids)
        heads = await self._read(_HEAD_SEQS + marks, params) if self._has_heads else []
        rows = await self._read(_SCAN_COLUMNS + marks + "ORDER BY task_id, trial, seq", params)
        folder = RowFolder(self._label, benchmark_id)
        summaries = folder.fold(rows) + folder.rest()
        check_heads_met(self._label, benchmark_id, heads, summaries)
        return summaries

    async def benchmark_config(self, benchmark_id: str) -> Mapping[str, Any] | None:
        rows = await self._read(
            "SELECT config, created_at FROM benchmarks WHERE benchmark_id = ?", (benchmark_id,)
        )
        return decode_benchmark(self._label, benchmark_id, *rows[0])[2] if rows else None

    async def benchmarks(self) -> list[BenchmarkInfo]:
        rows = await self._read(_BENCHMARKS, ())
        return [
            BenchmarkInfo.of(
                *decode_benchmark(self._label, benchmark_id, config, created), finished
            )
            for benchmark_id, created, config, finished in rows
        ]

    async def runs(self, benchmark_id: str) -> list[RunRecord]:
        def read(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
            if conn.execute(_HAS_RUNS).fetchone() is None:
                return []  # a version 1 store, opened read-only: no run recorded
            return conn.execute(_RUNS, (benchmark_id,)).fetchall()

        rows = await self._use(self._reader, read)
        return [decode_run(self._label, benchmark_id, text) for (text,) in rows]


def insert_rows(
    conn: sqlite3.Connection,
    statements: Sequence[str],
    benchmark_id: str,
    rows: list[tuple[Any, ...]],
) -> None:
    """Insert ``rows`` of ``benchmark_id``, in order, through ``statements``
    (`_statements`: the ``i``-th inserts ``2 ** i`` rows): a few statements a batch, the
    widest first, each binding the id once. ``executemany`` steps its statement once a
    row, and lets go of the GIL and takes it back each time, on the writer thread,
    beside the event loop that needs it; and SQLite copies every text it binds."""
    at, count, widest = 0, len(rows), len(statements)
    while at < count:
        size = min((count - at).bit_length(), widest) - 1
        end = at + (1 << size)
        params: list[Any] = [benchmark_id]
        params += chain.from_iterable(rows[at:end])
        conn.execute(statements[size], params)
        at = end


def _by_benchmark(
    appends: Iterable[tuple[TrialKey, Sequence[tuple[Any, ...]]]],
) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of these appends by benchmark, in order (a batch is nearly always of one)."""
    found: dict[str, list[tuple[Any, ...]]] = {}
    for key, rows in appends:
        found.setdefault(key.benchmark_id, []).extend(rows)
    return found


def put_head(conn: sqlite3.Connection, where: str, key: TrialKey) -> None:
    """Refold ``key``'s head from its commits (the one fold) and write it."""
    rows = conn.execute(_SCAN_TRIAL, tuple(key)).fetchall()
    try:
        heads = folded_heads(where, key.benchmark_id, rows)
    except StoreCorrupt:  # a commit no reader can read: the trial counts as unfinished
        heads = [TrialHead(key.task_id, key.trial, rows[-1][2] + 1, False)]
    for head in heads:
        conn.execute(_PUT_HEAD, (key.benchmark_id, *head.row(NULL)))


def rebuild_heads(conn: sqlite3.Connection, where: str) -> None:
    """Fold the head of every trial of a store written before heads were kept (inside
    the caller's transaction), saying so on stderr: it reads every commit once."""
    progress = RebuildProgress(where)
    for (benchmark_id,) in conn.execute("SELECT benchmark_id FROM benchmarks").fetchall():
        folder = RowFolder(where, benchmark_id)
        cursor = conn.execute(_SCAN_COLUMNS + "ORDER BY task_id, trial, seq", (benchmark_id,))
        while True:
            rows = cursor.fetchmany(4096)
            summaries = folder.fold(rows) if rows else folder.rest()
            put = [(benchmark_id, *head.row(NULL)) for head in headed(summaries)]
            conn.executemany(_PUT_HEAD, put)
            progress.add(len(summaries))
            if not rows:
                break
    progress.done()


def _version(conn: sqlite3.Connection) -> str | None:
    row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return None if row is None else str(row[0])


def _read_text(blob: sqlite3.Blob) -> Iterator[str]:
    """A stored configuration's text, a piece at a time."""
    return utf8_pieces(iter(lambda: blob.read(PIECE), b""))


# What `corral list` shows of each benchmark, written with its configuration and
# trusted only while the configuration's digest is the one it was counted from: in
# the meta table (a table of its own would be a new schema version, which older
# code refuses), keyed by `_OVERVIEW_KEY` and the benchmark id, as JSON
# [digest, trials per task, tasks].
_OVERVIEW_KEY = "overview:"
_KEPT_OVERVIEWS = "SELECT key, value FROM meta WHERE key >= 'overview:' AND key < 'overview;'"


def _keep_overview(
    conn: sqlite3.Connection, benchmark_id: str, digest: str, trials: int, tasks: int
) -> None:
    conn.execute(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        (_OVERVIEW_KEY + benchmark_id, dumps([digest, trials, tasks])),
    )


def _kept_overviews(conn: sqlite3.Connection) -> dict[str, tuple[str, int, int]]:
    """The overviews kept, by benchmark id (one that cannot be read is left out)."""
    found = {}
    for key, value in conn.execute(_KEPT_OVERVIEWS):
        try:
            digest, trials, tasks = json.loads(value)
        except (ValueError, TypeError):
            continue
        if isinstance(digest, str) and type(trials) is int and type(tasks) is int:
            found[key[len(_OVERVIEW_KEY) :]] = (digest, trials, tasks)
    return found


def _overview_rows(conn: sqlite3.Connection) -> list[tuple[Any, ...]]:
    """`_OVERVIEW`'s rows: kept ones where the configuration is the one they were
    counted from, the others read from its JSON."""
    kept = _kept_overviews(conn)
    rows: list[tuple[Any, ...]] = []
    missing: list[str] = []
    for rowid, benchmark_id, created_at in conn.execute(
        "SELECT rowid, benchmark_id, created_at FROM benchmarks ORDER BY created_at"
    ):
        found = kept.get(benchmark_id)
        if found is not None and found[0] == _digest(conn, rowid):
            rows.append((benchmark_id, created_at, found[1], found[2], 0))
        else:
            rows.append((benchmark_id,))
            missing.append(benchmark_id)
    if missing:
        read = {row[0]: row for row in _read_overviews(conn, missing)}
        rows = [read.get(row[0], row) if len(row) == 1 else row for row in rows]
    return rows


def _read_overviews(conn: sqlite3.Connection, benchmark_ids: list[str]) -> list[tuple[Any, ...]]:
    """`_OVERVIEW`'s rows of these benchmarks, read from their configurations' JSON."""
    marks = ", ".join("?" * len(benchmark_ids))
    where = f"FROM benchmarks WHERE benchmark_id IN ({marks}) ORDER BY"
    return conn.execute(
        _OVERVIEW.replace("FROM benchmarks ORDER BY", where), benchmark_ids
    ).fetchall()


def _digest(conn: sqlite3.Connection, rowid: int) -> str | None:
    """The MD5 of a stored configuration's bytes, read a piece at a time (None: it is
    not text)."""
    try:
        blob = conn.blobopen("benchmarks", "config", rowid, readonly=True)
    except sqlite3.OperationalError:
        return None
    digest = hashlib.md5(usedforsecurity=False)
    with blob:
        while data := blob.read(PIECE):
            digest.update(data)
    return digest.hexdigest()


def _keep_overviews(conn: sqlite3.Connection) -> None:
    """Keep the overviews of the benchmarks registered before they were kept (or by
    older code), read from their configurations once; a configuration that is not
    JSON, or not as Corral writes it, keeps none (``list`` reads it and says so)."""
    kept = _kept_overviews(conn)
    missing = [b for (b,) in conn.execute("SELECT benchmark_id FROM benchmarks") if b not in kept]
    for benchmark_id in missing:
        try:
            rows = _read_overviews(conn, [benchmark_id])
        except sqlite3.OperationalError:  # not JSON
            continue
        sound = checked_overview(rows)
        if sound:
            (rowid,) = conn.execute(_ROWID, (benchmark_id,)).fetchone()
            digest = _digest(conn, rowid)
            b = sound[0]
            if digest is not None:
                _keep_overview(conn, benchmark_id, digest, b.trials_per_task, b.tasks)
