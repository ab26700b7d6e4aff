"""The PostgreSQL store's writer: blocking code, run on the store's writer thread.

A batch of appends is one transaction (usually one statement); the store
acknowledges its appends only after COMMIT returned. Transient failures (a
dropped connection, a server restart, a serialization failure) are retried here
with backoff; when a connection dropped, the COMMIT may have landed or not, so
before writing again the writer looks up each append's first row and its append
id, and skips the appends that landed: a retry never becomes a false conflict
or a duplicate.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors

from .._errors import CommitConflictError, ConfigError, StoreCorrupt, StoreError
from .._types import Commit
from ._claim_writers import HOLDER
from ._heads import HEAD_COLUMNS, OpenFolds, TrialHead, folded_heads
from ._protocol import TrialKey

T = TypeVar("T")

log = logging.getLogger("corral.store")

#: How often a retry that goes on is reported (seconds).
NOTICE_EVERY = 5.0

#: One append: its trial, its rows (encoded when handed over) and its append id.
#: An append: its trial, its rows (each with the append's id) and its commits.
Request = tuple[TrialKey, list[tuple[Any, ...]], list[Commit]]

_COMMIT_COLUMNS = (
    "benchmark_id, task_id, trial, seq, kind, payload, created_at, input_tokens, "
    "output_tokens, cost, append_id"
)

# Each trial's head, rewritten from the one fold of its commits (`corral.store._heads`).
PUT_HEADS = (
    f"INSERT INTO corral.trial_heads (benchmark_id, {HEAD_COLUMNS}) "
    f"VALUES ({', '.join(['%s'] * (HEAD_COLUMNS.count(',') + 2))}) "
    "ON CONFLICT (benchmark_id, task_id, trial) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in HEAD_COLUMNS.split(", ")[2:])
)
_SCAN_ROWS = (
    "SELECT task_id, trial, seq, kind, "
    "CASE WHEN kind IN ('terminal', 'evaluation') THEN payload END, "
    "created_at, input_tokens, output_tokens, cost FROM corral.commits "
)
SCAN_ALL = _SCAN_ROWS + "WHERE benchmark_id = %s ORDER BY task_id, trial, seq"
_SCAN_TRIALS = (
    _SCAN_ROWS + "WHERE benchmark_id = %s AND (task_id, trial) IN "
    "(SELECT * FROM unnest(%s::text[], %s::int[])) ORDER BY task_id, trial, seq"
)

# The column types of a table, for statements that take a batch's rows as one array
# per column (`unnest`): one statement per batch, whatever its size.
_TYPES = (
    "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
    "WHERE attrelid = %s::regclass AND attnum > 0 AND NOT attisdropped"
)

# The claims a batch writes under that hold: at their epoch, its writer (the holder,
# -1, or a Ray host) not fenced off. FOR SHARE of both rows: a new claim (which raises
# the epoch) and a fence of this writer wait for the batch's transaction, so nothing
# lands after either; a fence of another writer does not.
_HELD = (
    "SELECT c.benchmark_id FROM corral.claims c "
    "JOIN unnest({0}::text[], {0}::bigint[], {0}::int4[]) AS e(b, n, h) "
    "ON c.benchmark_id = e.b AND c.epoch = e.n "
    "JOIN corral.claim_writers w ON w.benchmark_id = e.b AND w.epoch = e.n AND w.host = e.h "
    "AND NOT w.fenced FOR SHARE OF c, w"
)
FENCE = _HELD.format("%s")

_LANDED = (
    "SELECT k.i FROM unnest(%s::text[], %s::text[], %s::int[], %s::int[], %s::uuid[], "
    "%s::int[]) AS k(b, t, r, s, a, i) JOIN corral.commits c ON c.benchmark_id = k.b "
    "AND c.task_id = k.t AND c.trial = k.r AND c.seq = k.s AND c.append_id = k.a"
)

# Worth another try: the connection or the server went away, or the server asked
# for a retry. Anything else (a constraint, a bad value) would fail again.
TRANSIENT = (psycopg.OperationalError, psycopg.InterfaceError)
#: Operational errors the same statement meets every time: a value past a limit of the
#: server's (an id too long for an index entry).
DEFINITE = (pg_errors.ProgramLimitExceeded,)


def bad_option(exc: Exception) -> str | None:
    """libpq's complaint about a connection option's value (``invalid sslmode value:
    "x"``, ``invalid port number``), which no retry can fix; None for anything else."""
    text = str(exc).removeprefix("connection is bad: ")
    return text if text.startswith("invalid ") else None


# The server's definite no to a connection: no such database or role, bad
# credentials, not allowed in. (The server's messages, in its lc_messages: English
# unless configured otherwise; anything else is retried, as before.)
_REFUSALS = (
    " does not exist",
    "authentication failed",
    "no pg_hba.conf entry",
    "permission denied for database",
    "is not permitted to log in",
    "no password supplied",
)


def refusal(exc: Exception) -> str | None:
    """The server's refusal of a connection that no retry changes (``FATAL:  database
    "x" does not exist``), None for anything else."""
    text = str(exc)
    if "FATAL:" not in text and "fe_sendauth:" not in text:
        return None
    if not any(reason in text for reason in _REFUSALS):
        return None
    return text[text.find("FATAL:") if "FATAL:" in text else text.find("fe_sendauth:") :]


class FencedError(StoreError):
    """This store's claim on a benchmark was taken over: it may never write it again."""

    def __init__(self, message: str, benchmark_id: str) -> None:
        super().__init__(message)
        #: The benchmark fenced off: the store's claims on others still hold.
        self.benchmark_id = benchmark_id

    def __reduce__(self) -> tuple[type[FencedError], tuple[str, str], dict[str, Any]]:
        """Rebuilt from its pickle whole: a Ray host's reaches its coordinator as itself,
        with what was added to it (its notes), as any exception's pickle keeps."""
        return type(self), (str(self), self.benchmark_id), self.__dict__


def fenced_off(where: str, benchmark_id: str, host: int | None = None) -> FencedError:
    if host is not None:
        return FencedError(
            f"{where}: benchmark {benchmark_id!r} was claimed by another runner since this "
            f"Ray host's coordinator claimed it, or the coordinator replaced this host ({host}) "
            "and fenced it off; it may not write it",
            benchmark_id,
        )
    return FencedError(
        f"{where}: benchmark {benchmark_id!r} was claimed by another runner since this "
        "one claimed it; this runner may not write it",
        benchmark_id,
    )


def retrying(
    where: str,
    retry_for: float,
    attempt: Callable[[bool], T],
    shown: Callable[[str], str] = str,
) -> T:
    """Run ``attempt(after_failure)`` until it returns, retrying transient errors with
    backoff for ``retry_for`` seconds; then, or on any other database error, raise
    `StoreError`. ``after_failure`` tells the attempt a previous one failed. A refusal
    no retry can change (a bad option, no such database or role, bad credentials)
    is a `ConfigError` at once; a retry that goes on is logged (a warning) every
    `NOTICE_EVERY` seconds, so that waiting is never silent. Each error's text is said
    as ``shown`` gives it (the address's password masked)."""
    deadline: float | None = None
    started = noticed = 0.0
    delay = 0.05
    failed = False
    while True:
        try:
            return attempt(failed)
        except StoreError:
            raise
        except DEFINITE as exc:
            raise StoreError(f"{where}: {shown(str(exc))}") from exc
        except TRANSIENT as exc:
            if (option := bad_option(exc)) is not None:
                raise ConfigError(f"{where}: {shown(option)}") from exc
            if (refused := refusal(exc)) is not None:
                raise ConfigError(f"{where}: the server refused: {shown(refused)}") from exc
            now = time.monotonic()
            if deadline is None:
                started, noticed, deadline = now, now - NOTICE_EVERY, now + retry_for
            if now >= deadline:
                raise StoreError(
                    f"{where}: the database stayed unreachable for {retry_for:g} s: "
                    f"{shown(str(exc))}"
                ) from exc
            if now - noticed >= NOTICE_EVERY:
                noticed = now
                reason = " ".join(shown(str(exc)).split())
                log.warning(
                    "connecting to %s (retrying, %.0f s of %g s): %s",
                    where,
                    now - started,
                    retry_for,
                    reason,
                )
            failed = True
            time.sleep(min(delay, deadline - now))  # backoff in the worker thread
            delay = min(delay * 2, 2.0)
        except psycopg.Error as exc:
            raise StoreError(f"{where}: {shown(str(exc))}") from exc


class PgWriter:
    """Owns the write connection; ``write`` is what the store's `WriterThread` calls."""

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        where: str,
        *,
        retry_for: float,
        epochs: Mapping[str, int],
        hosts: Mapping[str, int],
        poisoned: set[TrialKey] | None = None,
    ) -> None:
        self._connect = connect
        self.where = where
        self.retry_for = retry_for
        #: The claims this store holds (benchmark id -> epoch), kept by the store.
        self.epochs = epochs
        #: The host number it writes a claim as (a Ray host's; the holder has none).
        self.hosts = hosts
        self.conn: psycopg.Connection[Any] | None = None
        # Trials with a failed append: later appends fail until history() is read.
        self.poisoned: set[TrialKey] = set() if poisoned is None else poisoned
        #: The folds of the trials this writer writes (their heads made from them).
        self.folds = OpenFolds()
        # (insert the commits, upsert the heads): each a whole batch in one statement.
        self._statements: _Statements | None = None

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _connection(self, after_failure: bool) -> psycopg.Connection[Any]:
        if after_failure or self.conn is None or self.conn.closed:
            self.folds.clear()  # another process may have written since this one did
            self.close()
            self.conn = self._connect()
        return self.conn

    def write(self, requests: list[Request]) -> list[BaseException | None]:
        errors: list[BaseException | None] = [None] * len(requests)
        todo = [i for i, (_, rows, _) in enumerate(requests) if rows]

        def attempt(after_failure: bool) -> None:
            conn = self._connection(after_failure)
            if after_failure:  # the last COMMIT may have landed: skip what did
                landed = self._landed(conn, [requests[i] for i in todo])
                todo[:] = [i for n, i in enumerate(todo) if n not in landed]
            self._write(conn, requests, todo, errors)

        retrying(self.where, self.retry_for, attempt)
        return errors

    def _write(
        self,
        conn: psycopg.Connection[Any],
        requests: list[Request],
        todo: list[int],
        errors: list[BaseException | None],
    ) -> None:
        while todo and not any(requests[i][0] in self.poisoned for i in todo):
            batch = [requests[i] for i in todo]
            try:
                self._transaction(conn, {key.benchmark_id for key, _, _ in batch}, batch)
                todo.clear()
                return
            except pg_errors.UniqueViolation:
                break  # rolled back: find the append that raced, one at a time
            except FencedError as exc:  # rolled back: the rest is written without it
                _refuse(exc, requests, todo, errors)
        for i in list(todo):
            key, rows, _ = requests[i]
            if key not in self.poisoned:
                try:
                    self._transaction(conn, {key.benchmark_id}, [requests[i]])
                except pg_errors.UniqueViolation as exc:
                    self.poisoned.add(key)
                    seqs = [row[3] for row in rows]
                    errors[i] = CommitConflictError(
                        f"{key}: sequence number {seqs} already taken ({exc.diag.message_detail})"
                    )
                except FencedError as exc:
                    errors[i] = exc
            else:
                errors[i] = CommitConflictError(f"{key}: an earlier append of this trial failed")
            todo.remove(i)  # only once settled: a retry must not write it again

    def _transaction(
        self, conn: psycopg.Connection[Any], benchmarks: Collection[str], batch: list[Request]
    ) -> None:
        # Both changed on the event loop's thread: each read once, the hosts first (a
        # `joined` block drops its epoch before its host, so an epoch read is never
        # paired with a host already gone: -1, the claim's holder, is not fenced off).
        hosts_of = {b: self.hosts.get(b, HOLDER) for b in benchmarks}
        known = self.epochs
        epochs = {b: e for b in benchmarks if (e := known.get(b)) is not None}
        hosts = [hosts_of[b] for b in epochs]
        rows = [row for _, rows, _ in batch for row in rows]
        if self._statements is None:
            self._statements = _Statements(conn)
        statements = self._statements
        try:
            heads, refold = self._known_heads(batch)
            if not refold:
                # The usual batch: every head it changes made from the folds in hand. One
                # statement, autocommitted: the fence, the rows, the heads.
                fenced = statements.append(bool(epochs), bool(heads))
                params: list[Any] = (
                    [list(epochs), list(epochs.values()), hosts, len(epochs)] if epochs else []
                )
                params += _columns(rows)
                if heads:
                    params += _columns(heads)
                held = set(conn.execute(fenced, params).fetchone()[0] or ())  # type: ignore[index]
                self._check_fence(epochs, held)
                return
            # A trial this writer has not folded from its start changes its head: refolded
            # from the store, its rows included, in the transaction that writes them
            # (pipelined: a round trip for the rows and the read, one for the rest).
            with (
                conn.pipeline(),
                conn.transaction(),
                conn.cursor() as fence,
                conn.cursor() as cur,
            ):
                if epochs:
                    fence.execute(FENCE, (list(epochs), list(epochs.values()), hosts))
                cur.execute(statements.insert, _columns(rows))
                heads += self._refolded(conn, refold)
                if heads:
                    cur.execute(statements.put_heads, _columns(heads))
                if epochs:
                    self._check_fence(epochs, {b for (b,) in fence.fetchall()})
        except BaseException:
            self.folds.clear()  # what the batch applied may not have landed
            raise

    def _check_fence(self, epochs: Mapping[str, int], held: Collection[str]) -> None:
        """Raise if a claim of ``epochs`` is not ``held`` at its epoch any more (the
        statement that found so wrote nothing)."""
        for benchmark_id in epochs:
            if benchmark_id not in held:
                raise fenced_off(self.where, benchmark_id, self.hosts.get(benchmark_id))

    def _known_heads(
        self, batch: list[Request]
    ) -> tuple[list[tuple[Any, ...]], dict[str, dict[tuple[str, int], None]]]:
        """The head of every trial these appends change that the writer's folds make
        (`OpenFolds`: one row per trial, the latest), and, by benchmark, the trials
        whose head must be refolded from the store instead."""
        refold: dict[str, dict[tuple[str, int], None]] = {}
        made: dict[tuple[str, str, int], tuple[Any, ...]] = {}
        for key, _, commits in batch:
            known, head = self.folds.heads(key, commits)
            if not known:
                refold.setdefault(key.benchmark_id, {})[(key.task_id, key.trial)] = None
            elif head is not None:
                made[(key.benchmark_id, key.task_id, key.trial)] = (key.benchmark_id, *head.row())
        for benchmark_id, keys in refold.items():  # a trial refolded has no head of its own
            for task_id, trial in keys:
                made.pop((benchmark_id, task_id, trial), None)
        return list(made.values()), refold

    def _refolded(
        self, conn: psycopg.Connection[Any], refold: dict[str, dict[tuple[str, int], None]]
    ) -> list[tuple[Any, ...]]:
        """The heads of the ``refold`` trials, folded from what the store holds of them
        (the batch's rows included: read in its transaction), one read per benchmark."""
        made = []
        for benchmark_id, keys in refold.items():
            tasks, trials = [k[0] for k in keys], [k[1] for k in keys]
            # A cursor of its own: in pipeline mode the inserts' cursor would hand back
            # their result ('INSERT 0 n'), not the scan's rows.
            with conn.cursor() as scan:
                rows = scan.execute(_SCAN_TRIALS, (benchmark_id, tasks, trials)).fetchall()
            try:
                heads = folded_heads(self.where, benchmark_id, rows)
            except StoreCorrupt:  # a commit no reader can read: counted as unfinished
                heads = [TrialHead(t, r, 0, False) for t, r in keys]
            made += [(benchmark_id, *h.row()) for h in heads]
        return made

    def _landed(self, conn: psycopg.Connection[Any], requests: list[Request]) -> set[int]:
        """Which of ``requests`` (by position) are in the store, by their append ids."""
        if not requests:
            return set()
        firsts = [rows[0] for _, rows, _ in requests]
        columns = [[row[n] for row in firsts] for n in (0, 1, 2, 3, 10)]
        rows = conn.execute(_LANDED, (*columns, list(range(len(requests))))).fetchall()
        return {int(row[0]) for row in rows}


def _refuse(
    fenced: FencedError,
    requests: list[Request],
    todo: list[int],
    errors: list[BaseException | None],
) -> None:
    """Fail the appends of the benchmark ``fenced`` names, and those alone: a run of
    another benchmark sharing the store holds its own claim and goes on writing (the
    fenced benchmark's later appends are refused by the fence again, so its histories
    never gain a gap)."""
    for i in list(todo):
        if requests[i][0].benchmark_id == fenced.benchmark_id:
            errors[i] = fenced
            todo.remove(i)


class _Statements:
    """The statements that write a batch, each taking one array per column (typed as
    the table's columns are; `unnest`), sent in binary: text arrays are quoted element
    by element in Python, at twice the writer's CPU.

    `append` is a whole batch in one statement: the claims checked and share-locked
    (a new claim, which raises the epoch, waits for it, so nothing lands after a claim
    was taken over), and only if every one holds, the rows and the heads; it answers
    the claims it found at their epochs. One round trip, where a transaction of the
    same statements took nine of psycopg's waits (about 300 us more of the writer's
    CPU a batch). `insert` and `put_heads` are the same writes for a transaction that
    reads between them (a head refolded from the store).
    """

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        selects = {}
        for table, columns in (
            ("corral.commits", _COMMIT_COLUMNS),
            ("corral.trial_heads", f"benchmark_id, {HEAD_COLUMNS}"),
        ):
            types = dict(conn.execute(_TYPES, (table,)).fetchall())
            arrays = ", ".join(f"%b::{types[c]}[]" for c in columns.split(", "))
            selects[table] = f"INSERT INTO {table} ({columns}) SELECT * FROM unnest({arrays})"
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in HEAD_COLUMNS.split(", ")[2:])
        self._upsert = f" ON CONFLICT (benchmark_id, task_id, trial) DO UPDATE SET {updates}"
        self.insert = selects["corral.commits"]
        self._heads = selects["corral.trial_heads"]
        self.put_heads = self._heads + self._upsert
        self._appends: dict[tuple[bool, bool], str] = {}

    def append(self, fenced: bool, heads: bool) -> str:
        """The one statement of a batch with claims to check (``fenced``) or not, and
        with heads to write or not (no empty arrays: their type is not known)."""
        statement = self._appends.get((fenced, heads))
        if statement is None:
            if fenced:
                fence = (
                    f"fence AS ({_HELD.format('%b')}), "
                    "held AS (SELECT array_agg(benchmark_id) AS ids, "
                    "count(*) = %b::int4 AS ok FROM fence)"
                )
                only = " WHERE (SELECT ok FROM held)"
                answer = "SELECT ids FROM held"
            else:
                fence, only, answer = "", "", "SELECT NULL::text[]"
            parts = [fence] if fence else []
            parts.append(f"commits AS ({self.insert}{only})")
            if heads:
                parts.append(f"heads AS ({self._heads}{only}{self._upsert})")
            statement = self._appends[(fenced, heads)] = f"WITH {', '.join(parts)} {answer}"
        return statement


def _columns(rows: list[tuple[Any, ...]]) -> list[list[Any]]:
    """Rows as one list per column (`unnest`'s arrays)."""
    return [list(column) for column in zip(*rows, strict=True)]
