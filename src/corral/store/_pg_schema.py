"""The PostgreSQL store's tables, created and versioned by Corral in a schema of its own.

Everything lives in the ``corral`` schema, so a database shared with other
applications only gains that one namespace.
"""

from __future__ import annotations

import re

import psycopg

from .._errors import StoreCorrupt, StoreError

SCHEMA_VERSION = 1

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
CREATE TABLE IF NOT EXISTS corral.claims (
    benchmark_id text COLLATE "C" PRIMARY KEY,
    -- The fencing token: raised by every claim, checked by every write.
    epoch bigint NOT NULL
);
"""


def ensure_schema(conn: psycopg.Connection[tuple[object, ...]], where: str) -> None:
    """Create the tables if they are missing; refuse a schema newer than this code."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        conn.execute(_DDL)
        conn.execute(
            "INSERT INTO corral.meta (key, value) VALUES ('schema_version', %s) "
            "ON CONFLICT (key) DO NOTHING",
            (str(SCHEMA_VERSION),),
        )
    check_schema(conn, where)


def upgrade_schema(conn: psycopg.Connection[tuple[object, ...]], where: str) -> None:
    """For a writer that must not create a store: add what a later version added (the
    run records) to one that exists; a database without Corral's tables stays so."""
    if _has_store(conn):
        ensure_schema(conn, where)
    else:
        check_schema(conn, where)


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
