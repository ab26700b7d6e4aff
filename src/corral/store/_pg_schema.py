"""The PostgreSQL store's tables, created and versioned by Corral in a schema of its own.

Everything lives in the ``corral`` schema, so a database shared with other
applications only gains that one namespace.
"""

from __future__ import annotations

import re

import psycopg

from .._errors import ConfigError, StoreCorrupt, StoreError
from ._heads import headed

SCHEMA_VERSION = 2
#: Version 2 added ``trial_heads`` (each trial's head, see `corral.store._heads`),
#: which every write keeps: older code, which would not, refuses the database.

# Two processes opening a fresh database at once would race on CREATE ... IF NOT
# EXISTS (a unique violation in the catalog): a transaction-scoped advisory lock
# on this key makes them take turns.
_SCHEMA_LOCK = 0x636F7272616C  # "corral"

_DDL = """
CREATE SCHEMA IF NOT EXISTS corral;
CREATE TABLE IF NOT EXISTS corral.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS corral.benchmarks (
    benchmark_id text COLLATE "C" PRIMARY KEY,
    config text NOT NULL,
    created_at double precision NOT NULL
);
CREATE TABLE IF NOT EXISTS corral.commits (
    benchmark_id text COLLATE "C" NOT NULL,
    task_id text COLLATE "C" NOT NULL,
    trial integer NOT NULL,
    seq integer NOT NULL,
    kind text NOT NULL,
    payload text NOT NULL,
    created_at double precision NOT NULL,
    input_tokens bigint NOT NULL DEFAULT 0,
    output_tokens bigint NOT NULL DEFAULT 0,
    cost double precision NOT NULL DEFAULT 0,
    -- Which append wrote the row: after a connection dropped during COMMIT, the
    -- writer looks its appends up by key and knows which of them landed.
    append_id uuid NOT NULL,
    PRIMARY KEY (benchmark_id, task_id, trial, seq)
);
-- Added after version 1 without a new version: older code never reads it, so
-- runners of both can share a database.
CREATE TABLE IF NOT EXISTS corral.runs (
    benchmark_id text COLLATE "C" NOT NULL,
    run integer NOT NULL,
    record text NOT NULL,
    PRIMARY KEY (benchmark_id, run)
);
CREATE TABLE IF NOT EXISTS corral.trial_heads (
    benchmark_id text COLLATE "C" NOT NULL,
    task_id text COLLATE "C" NOT NULL,
    trial integer NOT NULL,
    next_seq integer NOT NULL,
    done integer NOT NULL,
    status text,
    passed integer NOT NULL,
    score double precision,
    scores text,
    error text,
    evaluation_error text,
    attempts integer NOT NULL,
    commits integer NOT NULL,
    started_at double precision,
    finished_at double precision,
    input_tokens bigint NOT NULL,
    output_tokens bigint NOT NULL,
    cost double precision NOT NULL,
    limit_name text,
    working_time double precision,
    model_calls text,
    PRIMARY KEY (benchmark_id, task_id, trial)
);
-- What `corral list` shows of each benchmark, written with its configuration and
-- trusted only while the configuration's digest is the one it was counted from.
-- Added in version 2 without a new version: older code neither reads nor needs it.
CREATE TABLE IF NOT EXISTS corral.benchmark_overviews (
    benchmark_id text COLLATE "C" PRIMARY KEY,
    digest text NOT NULL,
    trials_per_task integer NOT NULL,
    tasks integer NOT NULL
);
CREATE TABLE IF NOT EXISTS corral.claims (
    benchmark_id text COLLATE "C" PRIMARY KEY,
    -- The fencing token: raised by every claim, checked by every write.
    epoch bigint NOT NULL
);
-- Who writes under a claim: its holder (host -1) and each Ray host that joined it.
-- Every write share-locks its writer's row and checks it is not fenced off; fencing
-- a host updates its row alone, so it waits for that host's writes in flight and for
-- no other's. Added in version 2 without a new version: older code neither reads
-- nor needs it.
CREATE TABLE IF NOT EXISTS corral.claim_writers (
    benchmark_id text COLLATE "C" NOT NULL,
    epoch bigint NOT NULL,
    host integer NOT NULL,
    fenced boolean NOT NULL DEFAULT false,
    PRIMARY KEY (benchmark_id, epoch, host)
);
"""


def ensure_schema(conn: psycopg.Connection[tuple[object, ...]], where: str) -> None:
    """Create the tables if they are missing; refuse a schema newer than this code."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        # A newer (or unreadable) version is refused before anything here changes it.
        check_schema(conn, where)
        version = stored_version(conn) if _has_store(conn) else SCHEMA_VERSION
        older = version < SCHEMA_VERSION
        if older or not _has_tables(conn):
            # Only then: even CREATE ... IF NOT EXISTS needs the right to create, which a
            # role that may write the rows of a store made once need not have.
            try:
                conn.execute(_DDL)
            except psycopg.errors.InsufficientPrivilege as exc:
                if not older:
                    raise  # tables missing: the caller says what writing needs
                # The upgrade's DDL (CREATE SCHEMA/TABLE IF NOT EXISTS) is refused for
                # want of CREATE on the database or on the schema, existing tables or not.
                why = exc.diag.message_primary or str(exc).splitlines()[0]
                raise ConfigError(
                    f"{where}: the store is of schema version {version} and must be "
                    f"upgraded to version {SCHEMA_VERSION} before it is written, which "
                    f"this role may not do ({why}); open it once for writing (corral "
                    "run, rescore) as a role with CREATE on the database and on the "
                    "corral schema (as the role that made the store has)"
                ) from exc
        if older:  # written before heads were kept: they are folded once, here
            # A runner of the older code still running writes commits and no heads:
            # every claim's epoch goes up first (waiting for its writes in flight), so
            # its next write is refused and nothing lands that the rebuild missed.
            conn.execute("UPDATE corral.claims SET epoch = epoch + 1")
            rebuild_heads(conn, where)
            conn.execute(
                "UPDATE corral.meta SET value = %s WHERE key = 'schema_version'",
                (str(SCHEMA_VERSION),),
            )
        conn.execute(
            "INSERT INTO corral.meta (key, value) VALUES ('schema_version', %s) "
            "ON CONFLICT (key) DO NOTHING",
            (str(SCHEMA_VERSION),),
        )
        _keep_overviews(conn)
    check_schema(conn, where)


# The overviews of the benchmarks registered before overviews were kept (or by older
# code): read from their configurations once, as `corral list` would read them.
_MISSING_OVERVIEWS = """
INSERT INTO corral.benchmark_overviews (benchmark_id, digest, trials_per_task, tasks)
SELECT benchmark_id, md5(config), trials::integer, tasks FROM (
    SELECT benchmark_id, config, config::json ->> 'trials_per_task' AS trials,
        (SELECT count(*)::int FROM json_object_keys(config::json -> 'tasks')) AS tasks,
        json_typeof(config::json -> 'tasks') IS DISTINCT FROM 'object' OR EXISTS (
            SELECT 1 FROM json_each(config::json -> 'tasks') t
            WHERE json_typeof(t.value) <> 'object'
            OR json_typeof(t.value -> 'environment_id') IS DISTINCT FROM 'string'
            OR coalesce(json_typeof(t.value -> 'model'), 'null') NOT IN ('string', 'null')
        ) AS amiss
    FROM corral.benchmarks b WHERE NOT EXISTS (
        SELECT 1 FROM corral.benchmark_overviews o WHERE o.benchmark_id = b.benchmark_id
    )
) x WHERE NOT amiss AND trials ~ '^[0-9]{1,7}$' AND trials::integer BETWEEN 1 AND 1000000
"""


def _keep_overviews(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    """Keep the overviews missing (`_MISSING_OVERVIEWS`); a configuration that is not
    JSON leaves them all to be read from the text (``list`` then says what is wrong)."""
    try:
        with conn.transaction():
            conn.execute(_MISSING_OVERVIEWS)
    except psycopg.DataError:
        pass


def stored_version(conn: psycopg.Connection[tuple[object, ...]]) -> int:
    """The schema version the database records (that of this code if none)."""
    row = conn.execute("SELECT value FROM corral.meta WHERE key = 'schema_version'").fetchone()
    text = str(row[0]) if row else str(SCHEMA_VERSION)
    return int(text) if re.fullmatch(r"[0-9]{1,9}", text) else SCHEMA_VERSION


def has_heads(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether the database keeps trial heads (one written before version 2, read with
    no right to upgrade it, does not: its heads are folded from the commits)."""
    return not _has_store(conn) or stored_version(conn) >= SCHEMA_VERSION


def rebuild_heads(conn: psycopg.Connection[tuple[object, ...]], where: str) -> None:
    """Fold the head of every trial (inside the caller's transaction), on stderr."""
    from ._heads import RebuildProgress
    from ._pg_writer import PUT_HEADS, SCAN_ALL
    from ._summary import RowFolder

    progress = RebuildProgress(where)
    benchmarks = conn.execute("SELECT benchmark_id FROM corral.benchmarks").fetchall()
    for (benchmark_id,) in benchmarks:
        folder = RowFolder(where, str(benchmark_id))
        with conn.cursor(name="corral_rebuild") as rows_of:
            rows_of.execute(SCAN_ALL, (benchmark_id,))
            while True:
                rows = rows_of.fetchmany(4096)
                summaries = folder.fold(rows) if rows else folder.rest()
                with conn.cursor() as cur:
                    cur.executemany(
                        PUT_HEADS, [(benchmark_id, *h.row()) for h in headed(summaries)]
                    )
                progress.add(len(summaries))
                if not rows:
                    break
    progress.done()


def upgrade_schema(conn: psycopg.Connection[tuple[object, ...]], where: str) -> None:
    """For a writer that must not create a store: add what a later version added (the
    run records) to one that exists; a database without Corral's tables stays so."""
    if _has_store(conn):
        ensure_schema(conn, where)
    else:
        check_schema(conn, where)


_TABLES = re.findall(r"CREATE TABLE IF NOT EXISTS (corral\.\w+)", _DDL)


def _has_tables(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    """Whether every table of `_DDL` is there (those added without a new version too)."""
    found = conn.execute(
        "SELECT bool_and(to_regclass(t) IS NOT NULL) FROM unnest(%s::text[]) t", (_TABLES,)
    ).fetchone()
    return bool(found and found[0])


def _has_store(conn: psycopg.Connection[tuple[object, ...]]) -> bool:
    found = conn.execute("SELECT to_regclass('corral.meta') IS NOT NULL").fetchone()
    return bool(found and found[0])


def check_schema(conn: psycopg.Connection[tuple[object, ...]], where: str) -> None:
    """Refuse a schema newer than this code, changing nothing: a database without
    Corral's tables is fine (it holds no benchmarks)."""
    if not _has_store(conn):
        return
    row = conn.execute("SELECT value FROM corral.meta WHERE key = 'schema_version'").fetchone()
    text = str(row[0]) if row else str(SCHEMA_VERSION)
    if re.fullmatch(r"[0-9]{1,9}", text) is None:
        raise StoreCorrupt(f"{where}: its schema version {text!r} is not a version number")
    version = int(text)
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{where}: the database holds Corral store schema version {version}, newer than "
            f"this Corral knows ({SCHEMA_VERSION}); upgrade Corral to use it"
        )
