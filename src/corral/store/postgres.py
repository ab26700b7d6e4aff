"""A shared store: PostgreSQL, for many runner processes and machines on one database.

The same shape as the SQLite store: appends from every running trial are
gathered into batches, each one transaction written by one worker thread at a
time (a thread works under asyncio and trio alike); an append is acknowledged
only after its COMMIT returned. Readers use a connection pool. The one-writer
claim is an advisory lock held on a connection of its own plus an epoch that
every write checks, so a runner that lost its claim can never write again.

psycopg is imported when a store is made, so ``import corral`` does not need it.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import unquote

import anyio
import anyio.to_thread

from .._checks import flag
from .._errors import BenchmarkBusyError, ConfigError, StoreError
from .._json import dumps
from .._types import Commit
from ..history import ConfigStream, StoredConfigText
from ._batching import Batch, Slot, WriterThread, surely
from ._claim_writers import HOLDER, check_host
from ._config_diff import check_same_stream
from ._decode import check_created, check_unbroken, decode_benchmark, decode_commit, decode_run
from ._heads import (
    CONFIG_PIECE,
    HEAD_COLUMNS,
    BenchmarkOverview,
    CountedConfig,
    TaskList,
    TrialHead,
    checked_overview,
    count_done,
    decode_head,
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
from ._summary import RowFolder, check_heads_met, checked_history

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

    from ._pg_writer import PgWriter, Request

T = TypeVar("T")

_COLUMNS = "seq, kind, payload, created_at, input_tokens, output_tokens, cost"

# Keyset pagination: each chunk is one short query on any pooled connection, so
# no cursor or transaction spans the chunks (nothing to close on a cancel).
_SCAN = (
    "SELECT task_id, trial, seq, kind, "
    "CASE WHEN kind IN ('terminal', 'evaluation') THEN payload END, "
    "created_at, input_tokens, output_tokens, cost FROM corral.commits "
    "WHERE benchmark_id = %s AND (task_id, trial, seq) > (%s, %s, %s) "
    "ORDER BY task_id, trial, seq LIMIT %s"
)

_SCAN_TASKS = (
    "SELECT task_id, trial, seq, kind, "
    "CASE WHEN kind IN ('terminal', 'evaluation') THEN payload END, "
    "created_at, input_tokens, output_tokens, cost FROM corral.commits "
    "WHERE benchmark_id = %s AND task_id = ANY(%s) ORDER BY task_id, trial, seq"
)
_HEAD_SEQS = (
    "SELECT task_id, trial, next_seq FROM corral.trial_heads "
    "WHERE benchmark_id = %s AND task_id = ANY(%s)"
)
_HEAD_SEQ = (
    "SELECT next_seq FROM corral.trial_heads "
    "WHERE benchmark_id = %s AND task_id = %s AND trial = %s"
)
_HEADS = (
    f"SELECT {HEAD_COLUMNS} FROM corral.trial_heads WHERE benchmark_id = %s "
    "AND (task_id, trial) > (%s, %s) ORDER BY task_id, trial LIMIT %s"
)
# As SQLite's: the last column says whether any task is not as Corral writes it.
_OVERVIEW = (
    "SELECT benchmark_id, created_at, config::json ->> 'trials_per_task', "
    "(SELECT count(*)::int FROM json_object_keys(config::json -> 'tasks')), "
    "json_typeof(config::json -> 'tasks') IS DISTINCT FROM 'object' OR EXISTS (SELECT 1 FROM "
    "json_each(config::json -> 'tasks') t WHERE json_typeof(t.value) <> 'object' "
    "OR json_typeof(t.value -> 'environment_id') IS DISTINCT FROM 'string' "
    "OR coalesce(json_typeof(t.value -> 'model'), 'null') NOT IN ('string', 'null')) "
    "FROM corral.benchmarks ORDER BY created_at"
)
_OVERVIEW_OF = _OVERVIEW.replace(
    "FROM corral.benchmarks ORDER BY",
    "FROM corral.benchmarks WHERE benchmark_id = ANY(%s) ORDER BY",
)
# The overviews kept (`CountedConfig`) of the configurations unchanged since: a digest
# of the text costs a fraction of reading it as JSON (null columns: none kept).
_KEPT_OVERVIEWS = (
    "SELECT b.benchmark_id, b.created_at, o.trials_per_task, o.tasks, false "
    "FROM corral.benchmarks b LEFT JOIN corral.benchmark_overviews o "
    "ON o.benchmark_id = b.benchmark_id AND o.digest = md5(b.config) ORDER BY b.created_at"
)
_KEEP_OVERVIEW = (
    "INSERT INTO corral.benchmark_overviews (benchmark_id, digest, trials_per_task, tasks) "
    "SELECT benchmark_id, md5(config), %s, %s FROM corral.benchmarks WHERE benchmark_id = %s "
    "ON CONFLICT (benchmark_id) DO UPDATE SET digest = excluded.digest, "
    "trials_per_task = excluded.trials_per_task, tasks = excluded.tasks"
)
_DONE = (
    "SELECT count(*) FROM corral.trial_heads WHERE benchmark_id = %s AND done = 1 AND trial < %s"
)
_WRITTEN = "SELECT coalesce(sum(next_seq), 0) FROM corral.trial_heads WHERE benchmark_id = %s"

# A trial is finished when its latest terminal commit follows its latest reopen.
_BENCHMARKS = """
SELECT b.benchmark_id, b.created_at, b.config, (
    SELECT count(*) FROM (
        SELECT max(seq) FILTER (WHERE kind = 'terminal') AS t,
               max(seq) FILTER (WHERE kind = 'reopen') AS r
        FROM corral.commits c WHERE c.benchmark_id = b.benchmark_id
        GROUP BY task_id, trial
    ) x WHERE t IS NOT NULL AND (r IS NULL OR t > r)
) FROM corral.benchmarks b ORDER BY b.created_at
"""

# The row this statement inserted, or the one that was there: the statement's
# snapshot does not see its own insert, so never both.
# Registering in pieces, in one transaction: the row is claimed with an empty
# configuration (a concurrent registration waits on it, then finds it stored), the
# text is copied in pieces into a temporary table and joined by the server.
_CLAIM = (
    "INSERT INTO corral.benchmarks (benchmark_id, config, created_at) VALUES (%s, '', %s) "
    "ON CONFLICT (benchmark_id) DO NOTHING RETURNING true"
)
_PIECES = "CREATE TEMP TABLE corral_config_pieces (n integer, piece text) ON COMMIT DROP"
_JOIN = (
    "UPDATE corral.benchmarks SET config = "
    "(SELECT string_agg(piece, '' ORDER BY n) FROM corral_config_pieces) "
    "WHERE benchmark_id = %s"
)
# The configuration as UTF-8 bytes in pieces, in order: decompressed once (a text's
# substr would decompress and count characters from its start for each piece).
_CONFIG_PIECES = (
    "WITH c AS MATERIALIZED (SELECT convert_to(config, 'UTF8') AS c, %s AS n "
    "FROM corral.benchmarks WHERE benchmark_id = %s) "
    "SELECT substring(c FROM s FOR n) FROM c, generate_series(1, length(c), n) s ORDER BY s"
)
_STORED = "SELECT created_at, length(config) FROM corral.benchmarks WHERE benchmark_id = %s"
_PIECE = "SELECT substr(config, %s, %s) FROM corral.benchmarks WHERE benchmark_id = %s"
#: Characters of a stored configuration read at a time (each read decompresses it).
_READ_PIECE = 1 << 20

# Numbered per benchmark in the order recorded; the claim keeps one writer per
# benchmark, so two records never race for a number.
#: A record already there (byte for byte: a retry of a call whose acknowledgement was
#: lost with the connection) is not recorded again.
_INSERT_RUN = (
    "INSERT INTO corral.runs (benchmark_id, run, record) "
    "SELECT %s, coalesce(max(run), 0) + 1, %s FROM corral.runs WHERE benchmark_id = %s "
    "HAVING NOT coalesce(bool_or(record = %s), false) "
    "RETURNING run"
)

_SCHEMES = ("postgresql://", "postgres://")

#: Seconds transient failures are retried, unless the URI (``?retry_for=S``) or
#: the constructor says otherwise.
DEFAULT_RETRY_FOR = 30.0


def append_ids() -> Iterator[str]:
    """Ids for one store's appends, each new: a random start, then one up per append.

    An id tells this store's append from another writer's at the same sequence
    number (`PgWriter` looks them up after a lost COMMIT): ids of two stores meet
    only if their random starts fall within an append count of each other. Not
    `uuid4` per append: each reads the OS's random source, a system call that
    lets go of the GIL, which a busy Ray host's threads then take turns for. As 32
    hex digits (PostgreSQL reads them as a uuid), not `uuid.UUID`s: made for
    every append, on the event loop."""
    start = uuid.uuid4().int
    for n in itertools.count():
        yield f"{(start + n) & _UUID_MASK:032x}"


_UUID_MASK = (1 << 128) - 1


def encode(key: TrialKey, commits: list[Commit], append_id: str) -> Request:
    """An append as the writer writes it: its rows (the commits' columns, the payload
    encoded, and the append's id), and its commits."""
    rows = [
        (
            *key,
            c.seq,
            c.kind,
            dumps(c.payload),
            float(c.created_at),  # a column's array has one type: never ints among floats
            c.usage.input_tokens,
            c.usage.output_tokens,
            float(c.usage.cost),
            append_id,
        )
        for c in commits
    ]
    return key, rows, commits


def is_postgres_dsn(store: object) -> bool:
    return isinstance(store, str) and store.startswith(_SCHEMES)


_SYNCHRONOUS = (
    "SELECT set_config('synchronous_commit', 'on', false) "
    "WHERE current_setting('synchronous_commit') = 'off'"
)

#: Milliseconds a writer's session may sit idle inside a transaction before the server
#: ends it (`PostgresStore._writer_connection`).
_IDLE_IN_TRANSACTION_MS = 60_000
#: Milliseconds `PostgresStore.fence_host` waits for the host's row between warnings.
_FENCE_WAIT_MS = 10_000
#: The claim's session, idle for the whole run, is never ended for it by a database's or
#: role's ``idle_session_timeout`` (PostgreSQL 14+): its lock would go with it.
_NEVER_IDLE_OUT = (
    "SELECT set_config('idle_session_timeout', '0', false) "
    "WHERE current_setting('idle_session_timeout', true) IS NOT NULL"
)
_ADD_WRITER = (
    "INSERT INTO corral.claim_writers (benchmark_id, epoch, host) VALUES (%s, %s, %s) "
    "ON CONFLICT (benchmark_id, epoch, host) DO NOTHING"
)
#: A writer's row fenced off (made so if it never joined): it waits for that writer's
#: writes in flight alone.
_FENCE_WRITER = (
    "INSERT INTO corral.claim_writers (benchmark_id, epoch, host, fenced) "
    "VALUES (%s, %s, %s, true) ON CONFLICT (benchmark_id, epoch, host) DO UPDATE SET fenced = true"
)
_DROP_OLD_WRITERS = (
    "DELETE FROM corral.claim_writers WHERE ctid IN (SELECT ctid FROM corral.claim_writers "
    "WHERE benchmark_id = %s AND epoch < %s FOR UPDATE SKIP LOCKED)"
)


def _until_fenced(conn: psycopg.Connection[Any], fence: Callable[[], object], what: str) -> None:
    """``fence()`` in a transaction of its own, again each time its lock waits longer than
    `_FENCE_WAIT_MS` (saying so: ``what`` waits for the writes in flight) or is
    chosen to end a deadlock."""
    from psycopg import errors

    from ._pg_writer import log

    while True:
        try:
            with conn.transaction():
                conn.execute(f"SET LOCAL lock_timeout = {_FENCE_WAIT_MS}")
                fence()
            return
        except (errors.LockNotAvailable, errors.DeadlockDetected):
            log.warning(
                "%s waits for its writes in flight (a writer frozen in a transaction is "
                "cut off after %d s)",
                what,
                _IDLE_IN_TRANSACTION_MS // 1000,
            )


class PostgresStore:
    """Commit histories in a PostgreSQL database (``postgresql://user@host/db``).

    Every acknowledged commit was committed by the server; with
    ``synchronous_commit=False`` an acknowledged commit may be lost if the
    server (not the runner) crashes, in exchange for faster batches.
    Transient database errors are retried for ``retry_for`` seconds (default 30,
    or the URI's ``?retry_for=S``) before the run fails with `StoreError`; what
    was acknowledged stays intact. A definite refusal (no such database or role,
    bad credentials) is a `ConfigError` at once.

    Opening creates Corral's tables if they are missing, unless ``create`` is
    False or the store is ``read_only``: then nothing is ever written (a
    SELECT-only role or a read-only database will do), and a database without
    the tables holds no benchmarks.
    """

    def __init__(
        self,
        dsn: str,
        *,
        synchronous_commit: bool = True,
        retry_for: float | None = None,
        readers: int = 4,
        read_only: bool = False,
        create: bool = True,
    ) -> None:
        if not isinstance(dsn, str) or not dsn.startswith(_SCHEMES):
            raise ConfigError(f"a PostgreSQL store needs a postgresql:// URI, not {dsn!r}")
        for name, value in (
            ("synchronous_commit", synchronous_commit),
            ("read_only", read_only),
            ("create", create),
        ):
            flag(name, value)
        conninfo, window = _retry_window(dsn)
        if retry_for is None:
            retry_for = DEFAULT_RETRY_FOR if window is None else window
        # A number (inf: retry for ever), never nan nor a bool: "soon" >= 0 is a TypeError.
        number = not isinstance(retry_for, bool) and isinstance(retry_for, int | float)
        if not number or not retry_for >= 0:
            raise ConfigError(f"retry_for must be >= 0 seconds, not {retry_for!r}")
        if not (isinstance(readers, int) and readers >= 1):
            raise ConfigError(f"readers must be a positive number of connections, not {readers!r}")
        try:
            from psycopg.conninfo import conninfo_to_dict
        except ImportError as exc:
            raise ConfigError(
                "a PostgreSQL store needs psycopg: pip install 'corral[postgres]'"
            ) from exc
        try:
            params = conninfo_to_dict(conninfo)
        except Exception as exc:  # psycopg.ProgrammingError, with the reason
            raise ConfigError(
                f"bad PostgreSQL URI {masked_uri(dsn)!r}: {masked(str(exc), dsn)}"
            ) from None
        if not params.get("dbname"):
            # libpq would fall back to a default database (the user's name, $PGDATABASE):
            # commits must never land somewhere the address does not name.
            raise ConfigError(
                f"the PostgreSQL URI {masked_uri(dsn)!r} names no database: "
                "postgresql://[USER@]HOST/DATABASE"
            )
        self.dsn = dsn
        #: The URI handed to libpq: ``dsn`` without Corral's own parameters.
        self.conninfo = conninfo
        self.synchronous_commit = synchronous_commit
        self.retry_for = float(retry_for)
        self.read_only = read_only
        self._create = create and not read_only
        self._dsn = dsn
        # False for a database written before heads were kept, read without the right
        # to upgrade it: its heads are folded from the commits when asked.
        self._has_heads = True
        self._where = f"PostgresStore({masked_uri(dsn)!r})"
        self._params = params
        self._readers = readers
        self._write_limiter = anyio.CapacityLimiter(1)
        self._read_limiter = anyio.CapacityLimiter(readers)
        self._epochs: dict[str, int] = {}  # claims held by this store, read by the writer
        self._hosts: dict[str, int] = {}  # the host this store writes claims as (`joined`)
        self._writer: PgWriter | None = None
        # Trials with a failed append: later appends fail until history() is read (kept
        # with the store, as SQLite's are: a reopen reads no history).
        self._poisoned: set[TrialKey] = set()
        self._pool: ConnectionPool[Any] | None = None
        self._queue: WriterThread[Request] = WriterThread(self._where, self._record_batch)
        self._append_ids = append_ids()

    def __repr__(self) -> str:
        return self._where

    def _shown(self, text: str) -> str:
        """``text`` (psycopg's) as messages may show it: the address's password masked."""
        return masked(text, self._dsn)

    # -- lifecycle ---------------------------------------------------------

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[None]:
        """Open the store for as long as the block runs; several runs may share it."""
        async with self._queue.used(self._connect, self._disconnect, writes=not self.read_only):
            yield

    def _connection(self, **options: Any) -> psycopg.Connection[Any]:
        import psycopg

        # Keepalives: a dead peer (a partition, a powered-off machine) is noticed.
        conn = psycopg.connect(
            self.conninfo,
            autocommit=True,
            connect_timeout=10,
            keepalives=1,
            keepalives_idle=30,
            keepalives_interval=10,
            keepalives_count=3,
            **options,
        )
        try:
            self._durable(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _durable(self, conn: psycopg.Connection[Any]) -> None:
        """With ``synchronous_commit`` (the default), a session whose server, database
        or role defaults to ``synchronous_commit = off`` commits synchronously: what
        it acknowledges is never lost with the server. A stronger setting (a standby's
        ``remote_apply``) is kept."""
        if self.synchronous_commit:
            conn.execute(_SYNCHRONOUS)

    def _writer_connection(self) -> psycopg.Connection[Any]:
        conn = self._connection(application_name="corral writer")
        # A writer frozen inside a transaction (a paused machine, a Ray host cut off from
        # its cluster) holds the claim's row and its own row of the claim's writers
        # share-locked: the server ends its session after this long, so a coordinator
        # fencing it off (`fence_host`) or a new claim goes on.
        conn.execute(f"SET idle_in_transaction_session_timeout = {_IDLE_IN_TRANSACTION_MS}")
        if not self.synchronous_commit:
            conn.execute("SET synchronous_commit = off")
        return conn

    async def _connect(self) -> None:
        await anyio.to_thread.run_sync(self._connect_now, limiter=self._write_limiter)

    async def _disconnect(self) -> None:
        await anyio.to_thread.run_sync(self._disconnect_now, limiter=self._write_limiter)

    def _connect_now(self) -> None:
        import psycopg
        from psycopg_pool import ConnectionPool

        from ._pg_log import route_psycopg_logs
        from ._pg_schema import check_schema, ensure_schema, has_heads, upgrade_schema
        from ._pg_writer import PgWriter, retrying

        route_psycopg_logs()

        writer = None
        if not self.read_only:
            writer = PgWriter(
                self._writer_connection,
                self._where,
                retry_for=self.retry_for,
                epochs=self._epochs,
                hosts=self._hosts,
                poisoned=self._poisoned,
            )

        def first(after_failure: bool) -> psycopg.Connection[Any]:
            try:
                if writer is None:  # read-only: a connection for the schema check
                    return self._connection(application_name="corral reader")
                return writer._connection(after_failure)
            except psycopg.OperationalError as exc:
                # A host name that does not resolve at the start is a typo far more
                # often than a blip: say so now, not after retry_for seconds.
                if str(exc).startswith("failed to resolve host"):
                    raise ConfigError(f"{self._where}: {self._shown(str(exc))}") from exc
                raise

        def with_schema(after_failure: bool) -> None:
            # One attempt: a session ended while the schema is made or checked (each
            # step a transaction of its own, safe to do again) is retried as one ended
            # mid-run is, on a new connection.
            conn = first(after_failure)
            try:
                if self._create:
                    ensure_schema(conn, self._where)
                else:
                    (check_schema if self.read_only else upgrade_schema)(conn, self._where)
                self._has_heads = has_heads(conn)
            finally:
                if writer is None:
                    conn.close()

        try:
            retrying(self._where, self.retry_for, with_schema, self._shown)
        except BaseException as exc:
            if writer is not None:
                writer.close()
            # The database's own error, under the StoreError `retrying` raised for it.
            cause = exc.__cause__ if isinstance(exc, StoreError) else exc
            if isinstance(cause, psycopg.errors.InsufficientPrivilege) and writer is not None:
                # A definite no, as a bad password is: a role that may only read.
                raise ConfigError(
                    f"{self._where}: this role may not write the store "
                    f"({self._shown(str(cause))}); writing (run, rescore, copy into it) "
                    "needs SELECT, INSERT, UPDATE and DELETE on the corral schema's "
                    "tables (and CREATE on the database where they are missing), reading "
                    "(list, report, show, view, compare) SELECT alone"
                ) from cause
            if isinstance(exc, psycopg.Error):
                raise StoreError(f"{self._where}: {self._shown(str(exc))}") from exc
            raise
        pool: ConnectionPool[Any] = ConnectionPool(
            self.conninfo,
            min_size=1,
            max_size=self._readers,
            kwargs={
                "autocommit": True,
                "connect_timeout": 10,
                "application_name": "corral reader",
            },
            configure=self._durable,  # registrations and run records are writes too
            open=False,
        )
        pool.open()
        self._writer, self._pool = writer, pool

    def _disconnect_now(self) -> None:
        if self._pool is not None:
            self._pool.close()
        if self._writer is not None:
            self._writer.close()
        self._writer = self._pool = None

    # -- writing -----------------------------------------------------------

    def _record_batch(self, batch: Batch[Request]) -> None:
        writer = self._writer
        assert writer is not None
        batch.record(writer.write, self._append_failed)

    def _check_writable(self) -> None:
        if self.read_only:
            raise StoreError(f"{self._where} was opened read-only: it is never written")

    def _append_failed(self, exc: Exception) -> StoreError:
        error = StoreError(f"{self._where}: append failed: {exc}")
        error.__cause__ = exc
        return error

    def enqueue(self, key: TrialKey, commits: Sequence[Commit]) -> Slot[Request]:
        self._check_writable()
        if self._writer is None:
            raise StoreError(f"{self!r} is not open")
        check_handed(key, commits)
        return self._queue.put(encode(key, list(commits), next(self._append_ids)))

    async def append(self, key: TrialKey, commits: Sequence[Commit]) -> None:
        check_payloads(key, commits)
        await self.enqueue(key, commits).wait()

    @asynccontextmanager
    async def claim(self, benchmark_id: str) -> AsyncIterator[None]:
        """An advisory lock on a connection of its own, and a new epoch for the benchmark.

        The server drops the lock with the session, however the holder ends, so a
        kill -9 leaves no stale claim; every write checks the epoch, so a runner
        whose session was ended (and whose claim was taken) can never write again.
        """
        self._check_writable()
        lock = int.from_bytes(hashlib.sha256(benchmark_id.encode()).digest()[:8], signed=True)
        taking = _Taking()
        try:
            conn, epoch = await anyio.to_thread.run_sync(
                taking.run, self._take_claim, benchmark_id, lock
            )
        except BaseException:
            # asyncio's Task.cancel() (which no cancel scope stops) while the thread was
            # taking it: the claim it took (or takes yet) is let go, never left held.
            left = taking.abandon()
            if left is not None:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_release, left[0], lock)
            raise
        self._epochs[benchmark_id] = epoch
        try:
            yield
        finally:
            try:
                # What was handed over under the claim is written under it (fenced)
                # before it ends: never unfenced once another runner may hold it.
                await surely(self._queue.settle)
            finally:
                self._epochs.pop(benchmark_id, None)
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(_release, conn, lock)

    def claim_epoch(self, benchmark_id: str) -> int | None:
        """The fencing epoch of this store's claim on ``benchmark_id`` (None: not held)."""
        return self._epochs.get(benchmark_id)

    def host_access(self, benchmark_id: str) -> HostAccess:
        """Hosts anywhere connect to the server, and write under this store's claim."""
        options = (("synchronous_commit", self.synchronous_commit), ("retry_for", self.retry_for))
        return HostAccess(self.dsn, options, "network", self.claim_epoch(benchmark_id))

    @asynccontextmanager
    async def joined(
        self, benchmark_id: str, epoch: int, host: int | None = None
    ) -> AsyncIterator[None]:
        """Write ``benchmark_id`` under a claim another process holds (its ``epoch``),
        without taking it, as host number ``host``: the Ray hosts of a run write under
        their coordinator's claim.

        Every write checks the epoch as the holder's own do, so once the claim is
        taken over (the coordinator died and a new run claimed the benchmark), a host
        that is still alive can never write again; nor can one its coordinator fenced
        off (`fence_host`).
        """
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 1:
            raise ConfigError(f"a claim's epoch is a positive integer, not {epoch!r}")
        if host is not None:
            check_host(host)
        if benchmark_id in self._epochs:
            raise BenchmarkBusyError(f"{self._where} already holds a claim on {benchmark_id!r}")
        if host is not None:
            self._check_writable()
            await self._query(
                lambda conn: conn.execute(_ADD_WRITER, (benchmark_id, epoch, host)),
                None,
                writes=True,
            )
            self._hosts[benchmark_id] = host
        self._epochs[benchmark_id] = epoch
        try:
            yield
        finally:
            try:
                await surely(self._queue.settle)  # written under the claim, as in `claim`
            finally:
                self._epochs.pop(benchmark_id, None)
                self._hosts.pop(benchmark_id, None)

    async def fence_host(self, benchmark_id: str, host: int) -> None:
        """Fence host ``host`` off this store's claim on ``benchmark_id``. The update of
        the host's row of the claim's writers waits for the host's writes in flight
        (each share-locks it) and no other host's, so once it returns, what the host
        wrote is readable and its next write finds itself fenced."""
        epoch = self._epochs.get(benchmark_id)
        if epoch is None or benchmark_id in self._hosts:
            raise StoreError(f"{self._where} holds no claim on {benchmark_id!r} to fence")
        check_host(host)

        from ._pg_writer import fenced_off

        def fence(conn: psycopg.Connection[Any]) -> None:
            def once() -> None:
                held = conn.execute(
                    "SELECT 1 FROM corral.claims WHERE benchmark_id = %s AND epoch = %s",
                    (benchmark_id, epoch),
                ).fetchone()
                if held is None:  # taken over: its writers are fenced off already
                    raise fenced_off(self._where, benchmark_id)
                # The host's row alone: its writes in flight hold it, no other's.
                conn.execute(_FENCE_WRITER, (benchmark_id, epoch, host))

            _until_fenced(
                conn, once, f"{self._where}: fencing Ray host {host} off {benchmark_id!r}"
            )

        await self._query(fence, None, writes=True)

    def _fence_writers(self, conn: psycopg.Connection[Any], benchmark_id: str) -> None:
        writers = conn.execute(
            "SELECT epoch, host FROM corral.claim_writers WHERE benchmark_id = %s "
            "AND NOT fenced ORDER BY epoch, host",
            (benchmark_id,),
        ).fetchall()
        for epoch, host in writers:
            _until_fenced(
                conn,
                functools.partial(conn.execute, _FENCE_WRITER, (benchmark_id, epoch, host)),
                f"{self._where}: claiming {benchmark_id!r} fences off writer {host} of "
                f"claim {epoch}, which",
            )

    def _take_claim(self, benchmark_id: str, lock: int) -> tuple[psycopg.Connection[Any], int]:
        """Take the claim on a session of its own, retried for ``retry_for`` seconds as
        any write is: a session that ended meanwhile (a server restart, an admin) is
        ended for sure (it may live on at the server, holding the lock) and the claim
        taken on a new one."""
        from ._pg_writer import retrying

        # This claim's sessions that failed: their server pids and when they started.
        pids: list[int] = []
        starts: list[Any] = []

        def attempt(after_failure: bool) -> tuple[psycopg.Connection[Any], int]:
            conn = self._connection(application_name="corral claim")
            try:
                if pids:
                    conn.execute(_END_FAILED_CLAIMS, (pids, starts))
                (started,) = conn.execute(_SESSION_START).fetchone() or (None,)
                try:
                    return conn, self._claim_on(conn, benchmark_id, lock)
                except BaseException:
                    pids.append(conn.info.backend_pid)
                    starts.append(started)
                    raise
            except BaseException:
                conn.close()
                raise

        return retrying(f"{self._where}: cannot claim {benchmark_id!r}", self.retry_for, attempt)

    def _claim_on(self, conn: psycopg.Connection[Any], benchmark_id: str, lock: int) -> int:
        """Take the lock on ``conn`` and raise the benchmark's epoch; the new epoch."""
        conn.execute(_NEVER_IDLE_OUT)
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (lock,)).fetchone()
        if not (row and row[0]):
            raise BenchmarkBusyError(
                f"benchmark {benchmark_id!r} is being run by another live runner on "
                f"{self._where}; wait for it to finish or stop it"
            )
        # Every writer of earlier claims (hosts of a coordinator that died, which
        # may live on) is fenced off first, a row at a time (each waits for its one
        # writer's write in flight, and holds nothing else meanwhile: no deadlock
        # with a write of several benchmarks); their later writes are refused. The
        # raise of the epoch then waits for the writes still in flight, where it
        # would otherwise wait while hosts kept writing (each write share-locks the
        # claim's row, and a new share lock gets in ahead of it). A host an old
        # coordinator still alive adds meanwhile is stopped by the epoch alone.
        self._fence_writers(conn, benchmark_id)
        with conn.transaction():
            (epoch,) = conn.execute(
                "INSERT INTO corral.claims (benchmark_id, epoch) VALUES (%s, 1) "
                "ON CONFLICT (benchmark_id) DO UPDATE SET epoch = corral.claims.epoch + 1 "
                "RETURNING epoch",
                (benchmark_id,),
            ).fetchone() or (0,)
            # The holder writes as host -1. The writers of earlier claims are done
            # for (their epoch is gone): their rows go, but for those a write of a
            # host still alive holds (left for a later claim: waiting for them could
            # deadlock with that write, which waits for the claim's row).
            conn.execute(_ADD_WRITER, (benchmark_id, epoch, HOLDER))
            conn.execute(_DROP_OLD_WRITERS, (benchmark_id, epoch))
        return int(epoch)

    async def register_benchmark(
        self,
        benchmark_id: str,
        config: Mapping[str, Any] | ConfigStream,
        *,
        created_at: float | None = None,
    ) -> bool:
        self._check_writable()
        stream = ConfigStream.of(config)
        created = time.time() if created_at is None else created_at

        def register(conn: psycopg.Connection[Any]) -> bool:
            with conn.transaction():
                return self._register(conn, benchmark_id, stream, created)

        return await self._query(register, False, writes=True)

    def _register(
        self, conn: psycopg.Connection[Any], benchmark_id: str, config: ConfigStream, created: float
    ) -> bool:
        """Store the configuration, or compare it with the stored one, in pieces."""
        while True:
            if conn.execute(_CLAIM, (benchmark_id, created)).fetchone() is not None:
                conn.execute(_PIECES)
                counted = CountedConfig(config)
                with conn.cursor().copy("COPY corral_config_pieces (n, piece) FROM STDIN") as copy:
                    for n, piece in enumerate(counted.text()):
                        copy.write_row((n, piece))
                conn.execute(_JOIN, (benchmark_id,))
                if counted.overview is not None:
                    conn.execute(_KEEP_OVERVIEW, (*counted.overview, benchmark_id))
                return False
            row = conn.execute(_STORED, (benchmark_id,)).fetchone()
            if row is not None:  # None: deleted since the claim found it; claim again
                break
        stored_at, length = row
        check_created(self._where, benchmark_id, stored_at)

        def pieces() -> Iterator[str]:
            for start in range(1, length + 1, _READ_PIECE):
                found = conn.execute(_PIECE, (start, _READ_PIECE, benchmark_id)).fetchone()
                yield "" if found is None else found[0]

        def whole() -> Mapping[str, Any]:
            found = conn.execute(
                "SELECT config, created_at FROM corral.benchmarks WHERE benchmark_id = %s",
                (benchmark_id,),
            ).fetchone()
            assert found is not None  # the claim above holds it
            return decode_benchmark(self._where, benchmark_id, *found)[2]

        check_same_stream(benchmark_id, StoredConfigText(pieces()), config, whole)
        return True

    async def record_run(self, benchmark_id: str, record: RunRecord) -> None:
        self._check_writable()
        await self._queue.settle()
        text = dumps(record.to_dict())
        params = (benchmark_id, text, benchmark_id, text)
        epoch = self._epochs.get(benchmark_id)
        if epoch is None:  # written outside a claim (`corral copy`), as appends can be
            await self._read(_INSERT_RUN, params, writes=True)
            return

        from ._pg_writer import FENCE, fenced_off

        def fenced(conn: psycopg.Connection[Any]) -> None:
            # Under the claim's fence, as every append: a runner whose claim was taken
            # over records no run in the new holder's benchmark.
            writer = self._hosts.get(benchmark_id, HOLDER)
            with conn.transaction():
                held = conn.execute(FENCE, ([benchmark_id], [epoch], [writer])).fetchall()
                if held != [(benchmark_id,)]:
                    raise fenced_off(self._where, benchmark_id)
                conn.execute(_INSERT_RUN, params)

        await self._query(fenced, None, writes=True)

    # -- reading -----------------------------------------------------------

    async def _read(
        self, sql: str, params: tuple[Any, ...], *, writes: bool = False
    ) -> list[tuple[Any, ...]]:
        """The rows of ``sql``; where Corral does not create its tables, a query that
        only reads finds none in a database without them."""
        rows: list[tuple[Any, ...]] = await self._query(
            lambda conn: conn.execute(sql, params).fetchall(), [], writes=writes
        )
        return rows

    async def _read_chunk(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        """One chunk of a keyset scan, walked down the primary key's index.

        A table written by a run has no statistics until autovacuum analyzes it (or
        never, where it is off): the planner then guesses a few hundred rows past the
        key and sorts everything after it for each chunk (88 ms against 2 ms a chunk
        at 100,000 trials), so sorting is ruled out for this one statement.
        """

        def chunk(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            with conn.transaction():
                conn.execute("SET LOCAL enable_sort = off")
                return conn.execute(sql, params).fetchall()

        rows: list[tuple[Any, ...]] = await self._query(chunk, [])
        return rows

    async def _query(
        self, use: Callable[[psycopg.Connection[Any]], T], missing: T, *, writes: bool = False
    ) -> T:
        """``use(connection)`` on a reader, retried as a whole; ``missing`` where Corral
        does not create its tables and a query that only reads finds none."""
        from psycopg import errors

        from ._pg_writer import retrying

        def attempt(after_failure: bool) -> T:
            pool = self._pool
            if pool is None:
                raise StoreError(f"{self!r} is not open")
            if after_failure:
                pool.check()  # drop the connections the outage broke
            with pool.connection() as conn:
                try:
                    return use(conn)
                except (errors.UndefinedTable, errors.InvalidSchemaName):
                    if writes or self._create:
                        raise
                    return missing

        return await anyio.to_thread.run_sync(
            retrying, self._where, self.retry_for, attempt, self._shown, limiter=self._read_limiter
        )

    async def history(self, key: TrialKey) -> list[Commit]:
        await self._queue.settle()
        self._poisoned.discard(key)
        rows = await self._read(
            f"SELECT {_COLUMNS} FROM corral.commits "
            "WHERE benchmark_id = %s AND task_id = %s AND trial = %s ORDER BY seq",
            tuple(key),
        )
        where = self._where
        commits = [decode_commit(where, key.benchmark_id, key.task_id, key.trial, r) for r in rows]
        check_unbroken(where, key, commits)
        return commits

    async def checked_history(self, key: TrialKey) -> list[Commit]:
        """`history`, checked against its head read first (`checked_history`)."""
        heads = await self._read(_HEAD_SEQ, tuple(key)) if self._has_heads else []
        return checked_history(self._where, key, await self.history(key), heads)

    async def summaries(self, benchmark_id: str) -> list[TrialSummary]:
        return [s async for chunk in self.scan(benchmark_id) for s in chunk]

    async def scan(self, benchmark_id: str, chunk: int = 4096) -> AsyncIterator[list[TrialSummary]]:
        """One pass in key order over the benchmark's commits, a chunk of rows at a time;
        only terminal and evaluation payloads are read."""
        await self._queue.settle()
        folder = RowFolder(self._where, benchmark_id)
        after: tuple[Any, ...] = ("", -1, -1)
        while rows := await self._read_chunk(_SCAN, (benchmark_id, *after, chunk)):
            after = rows[-1][:3]
            if out := folder.fold(rows):
                yield out
        if rest := folder.rest():
            yield rest

    async def heads(self, benchmark_id: str, chunk: int = 8192) -> AsyncIterator[list[TrialHead]]:
        """Every kept head of the benchmark, in (task id, trial) order, a chunk at a time."""
        await self._queue.settle()
        if not self._has_heads:
            async for summaries in self.scan(benchmark_id):
                yield headed(summaries)
            return
        after: tuple[Any, ...] = ("", -1)
        while rows := await self._read_chunk(_HEADS, (benchmark_id, *after, chunk)):
            after = rows[-1][:2]
            yield [decode_head(self._where, benchmark_id, row) for row in rows]
            if len(rows) < chunk:
                break

    async def finished_trials(self, benchmark_id: str, trials_per_task: int) -> int:
        """Trials finished as a report counts them (`TrialHead.done`)."""
        if not self._has_heads:
            return await count_done(self.heads(benchmark_id), trials_per_task)
        rows = await self._read(_DONE, (benchmark_id, trials_per_task))
        return int(rows[0][0]) if rows else 0

    async def heads_written(self, benchmark_id: str) -> int:
        if not self._has_heads:
            return await sum_written(self.heads(benchmark_id))
        rows = await self._read(_WRITTEN, (benchmark_id,))
        return int(rows[0][0]) if rows else 0

    async def task_list(self, benchmark_id: str) -> TaskList | None:
        """Read a piece at a time (`task_list_of_pieces`): the configuration's text is
        never held whole, on either side."""

        def read(conn: psycopg.Connection[Any]) -> TaskList | None:
            rows = conn.cursor(binary=True).stream(_CONFIG_PIECES, (CONFIG_PIECE, benchmark_id))
            return task_list_of_pieces(utf8_pieces(piece for (piece,) in rows))

        return await self._query(read, None)

    async def overview(self) -> list[BenchmarkOverview] | None:
        """Each benchmark's overview as written with its configuration, where that is
        unchanged since (its digest); the others' read from their configurations."""
        from psycopg import errors

        def read(conn: psycopg.Connection[Any]) -> list[tuple[Any, ...]]:
            try:
                rows = conn.execute(_KEPT_OVERVIEWS).fetchall()
            except errors.UndefinedTable:  # written by older code only
                return conn.execute(_OVERVIEW).fetchall()
            if missing := [row[0] for row in rows if row[2] is None]:
                found = {row[0]: row for row in conn.execute(_OVERVIEW_OF, (missing,))}
                rows = [found.get(row[0], row) if row[2] is None else row for row in rows]
            return rows

        none: list[tuple[Any, ...]] = []
        try:
            rows = await self._query(read, none)
        except StoreError:  # not JSON: read whole, it says so
            return None
        return checked_overview(rows)

    def reader(self) -> PostgresStore:
        """The same database, opened read-only with one reader connection."""
        return PostgresStore(self._dsn, read_only=True, readers=1, retry_for=self.retry_for)

    async def task_summaries(
        self, benchmark_id: str, task_ids: Sequence[str]
    ) -> list[TrialSummary]:
        """The summaries of these tasks' trials, folded from their commits; checked
        against their heads, read first (`check_heads_met`: each statement reads what
        was committed when it began, so the heads' commits are all seen by the next)."""
        await self._queue.settle()
        params = (benchmark_id, list(task_ids))
        heads = await self._read(_HEAD_SEQS, params) if self._has_heads else []
        rows = await self._read(_SCAN_TASKS, params)
        folder = RowFolder(self._where, benchmark_id)
        summaries = folder.fold(rows) + folder.rest()
        check_heads_met(self._where, benchmark_id, heads, summaries)
        return summaries

    async def benchmark_config(self, benchmark_id: str) -> Mapping[str, Any] | None:
        rows = await self._read(
            "SELECT config, created_at FROM corral.benchmarks WHERE benchmark_id = %s",
            (benchmark_id,),
        )
        return decode_benchmark(self._where, benchmark_id, *rows[0])[2] if rows else None

    async def benchmarks(self) -> list[BenchmarkInfo]:
        rows = await self._read(_BENCHMARKS, ())
        return [
            BenchmarkInfo.of(
                *decode_benchmark(self._where, benchmark_id, config, created), finished
            )
            for benchmark_id, created, config, finished in rows
        ]

    async def runs(self, benchmark_id: str) -> list[RunRecord]:
        rows = await self._read(
            "SELECT record FROM corral.runs WHERE benchmark_id = %s ORDER BY run", (benchmark_id,)
        )
        return [decode_run(self._where, benchmark_id, text) for (text,) in rows]


class _Taking:
    """A claim being taken on a worker thread, for a task that may stop waiting for it
    (`abandon`): then whichever side has the claim last lets it go."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._abandoned = False
        self._taken: tuple[psycopg.Connection[Any], int] | None = None

    def run(
        self,
        take: Callable[[str, int], tuple[psycopg.Connection[Any], int]],
        benchmark_id: str,
        lock: int,
    ) -> tuple[psycopg.Connection[Any], int]:
        taken = take(benchmark_id, lock)
        with self._mutex:
            if not self._abandoned:
                self._taken = taken
                return taken
        _release(taken[0], lock)  # nobody waits for it any more
        return taken

    def abandon(self) -> tuple[psycopg.Connection[Any], int] | None:
        """Stop waiting: the claim taken already (to let go of), or None."""
        with self._mutex:
            self._abandoned = True
            taken, self._taken = self._taken, None
        return taken


#: Ends this store's claim sessions that failed while the claim was taken, if the server
#: still has them (a dead peer is noticed late), so their lock is free; by pid and the
#: time the session started (`_SESSION_START`), and only a session of this database
#: named as a claim's is. A pid alone may name another session since (a server
#: restarted in a container counts pids from 1 again): another runner's claim, ended,
#: or under another role a refusal ("must be a superuser to terminate ...").
_END_FAILED_CLAIMS = (
    "SELECT pg_terminate_backend(a.pid, 5000) FROM pg_stat_activity a "
    "JOIN unnest(%s::int[], %s::timestamptz[]) AS f (pid, started) "
    "ON a.pid = f.pid AND a.backend_start = f.started "
    "WHERE a.datname = current_database() AND a.application_name = 'corral claim'"
)
#: When this session started (with its pid, what names it for `_END_FAILED_CLAIMS`).
_SESSION_START = "SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"


def _release(conn: psycopg.Connection[Any], lock: int) -> None:
    """Unlock before closing: the server ends a closed session only some time after
    the socket closes, and a claim right after this one must not find it held."""
    try:
        conn.rollback()
        conn.execute("SELECT pg_advisory_unlock(%s)", (lock,))
    except Exception:  # noqa: S110 - a dead session has released its lock already
        pass
    finally:
        conn.close()


def _retry_window(dsn: str) -> tuple[str, float | None]:
    """The URI without Corral's ``retry_for`` parameter (libpq refuses parameters it
    does not know), and that parameter's value. The other parameters are kept as
    written: libpq decodes them itself."""
    base, sep, query = dsn.partition("?")
    kept, window = [], None
    for item in query.split("&") if sep else ():
        name, _, value = item.partition("=")
        if name != "retry_for":
            kept.append(item)
            continue
        try:
            window = float(value)
        except ValueError:
            raise ConfigError(
                f"retry_for={value!r} in {masked_uri(dsn)!r} is not a number of seconds"
            ) from None
    return (f"{base}?{'&'.join(kept)}" if kept else base), window


def masked_uri(dsn: str) -> str:
    """The URI without its password (in the user part or a parameter), for messages."""
    head, userinfo, at, rest = _split_userinfo(dsn)
    if at and ":" in userinfo:
        userinfo = userinfo.split(":", 1)[0] + ":***"
    where, qsep, query = rest.partition("?")
    if qsep:
        items = query.split("&")
        query = "&".join(f"{i.partition('=')[0]}=***" if _is_password(i) else i for i in items)
    return f"{head}{userinfo}{at}{where}{qsep}{query}"


def masked(text: str, dsn: str) -> str:
    """``text`` (psycopg's, quoting a piece of ``dsn``) with every password of ``dsn``
    replaced by ``***``, as written and as decoded."""
    _, userinfo, at, rest = _split_userinfo(dsn)
    secrets = [userinfo.partition(":")[2]] if at else []
    secrets += [i.partition("=")[2] for i in rest.partition("?")[2].split("&") if _is_password(i)]
    # A raw "/" or "@" in a password (not percent-encoded) makes libpq read its pieces as
    # a host, port or database, which its messages then quote: those pieces go too.
    secrets += [p for s in secrets for p in re.split(r"[@/:?#]", s)]
    for secret in sorted({*secrets, *map(unquote, secrets)} - {""}, key=len, reverse=True):
        if len(secret) >= _WORDLIKE:
            text = text.replace(secret, "***")
        else:  # where it stands alone (quoted, before an "@"), not inside every word
            text = re.sub(rf"(?<![^\W_]){re.escape(secret)}(?![^\W_])", "***", text)
    return text


#: A secret (a password, or a piece of one) shorter than this is masked only where it
#: is not part of a longer word: "ab" masked everywhere made "database" "dat***ase".
_WORDLIKE = 3


def _split_userinfo(dsn: str) -> tuple[str, str, str, str]:
    """(scheme://, user info, "@" or "", the rest), split where a password could end, for
    masking it: libpq's user info ends at the first "@" before any "/" (so a password
    may hold a "?"), but one with a raw "/" or "@" (a typo libpq reads otherwise) is
    taken to run to the last "@" before the parameters. Not when libpq reads what comes
    before that "@" as HOST/DATABASE, and nothing after it as one: then the "@" is the
    database's (``postgresql://u:p@host/db@x``)."""
    scheme, sep, rest = dsn.partition("://")
    first = next((i for i, c in enumerate(rest) if c in "@/"), len(rest))
    at_first = rest[first : first + 1] == "@"
    asked = rest.find("?", 0, first)
    if at_first and asked >= 0 and _HOSTS.fullmatch(rest[:asked]):
        # HOST?...password=p@ss: the "@" is a parameter's password's, masked as one.
        if any(_is_password(item) for item in rest[asked + 1 : first].split("&")):
            return scheme + sep, "", "", rest
    query = rest.find("?", first + 1 if at_first else 0)
    stop = len(rest) if query < 0 else query
    last = rest.rfind("@", 0, stop)
    end = first if at_first else -1
    if (
        last > first
        and (
            "/" in rest[last:stop]  # what follows the last "@" reads as HOST/DATABASE
            or ("/" not in rest[first:last] if at_first else not _HOSTS.fullmatch(rest[:first]))
        )
    ):
        end = last
    if end >= 0:
        return scheme + sep, rest[:end], "@", rest[end + 1 :]
    return scheme + sep, "", "", rest


#: What libpq reads as an address's hosts (and ports): ``h``, ``h:5432``, ``[::1]:5432``,
#: several separated by commas.
_HOST = r"(?:\[[^\]/]*\]|[^:/@,\[\]]*)(?::\d*)?"
_HOSTS = re.compile(rf"{_HOST}(?:,{_HOST})*")


def _is_password(item: str) -> bool:
    # In any case or percent-encoded, it is meant as one (libpq refuses such a name,
    # and the refusal quotes the URI).
    return unquote(item.partition("=")[0]).lower() == "password"
