"""Fixtures for tests against a real PostgreSQL server: a fresh database per test.

The server is the machine's (127.0.0.1:5432, user postgres, trust auth). Where
none is reachable the tests skip and say why, except under ``CI=true``, where
a missing server is a failure.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

SERVER = os.environ.get("CORRAL_TEST_PG", "postgresql://postgres@127.0.0.1:5432")


def _admin_dsn(database: str = "postgres") -> str:
    return f"{SERVER}/{database}"


def _server_problem() -> str | None:
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed (pip install 'corral[postgres]')"
    try:
        psycopg.connect(_admin_dsn(), connect_timeout=3).close()
    except psycopg.Error as exc:
        return f"no PostgreSQL server at {SERVER}: {exc}".strip()
    return None


def require_server() -> None:
    problem = _server_problem()
    if problem is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true, but {problem}")
    pytest.skip(problem)


def create_database() -> str:
    import psycopg

    name = f"corral_test_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect(_admin_dsn(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def fresh_database() -> Iterator[str]:
    """The URI of a database of this test's own, dropped afterwards."""
    require_server()
    name = create_database()
    try:
        yield _admin_dsn(name)
    finally:
        drop_database(name)


pg_dsn = pytest.fixture(fresh_database, name="pg_dsn")


def wait_for_server(
    dsn: str, sql: str, params: tuple[object, ...] = (), timeout: float = 10
) -> None:
    """Return once ``sql`` gives a true first column: a state of the server that the test
    cannot be told of otherwise (a backend waiting on a lock, a session gone)."""
    import time

    import psycopg

    deadline = time.monotonic() + timeout
    with psycopg.connect(dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(sql, params).fetchone()
            if row and row[0]:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the server never reached: {sql} {params}")
            time.sleep(0.01)  # polling the server's state, not waiting for time to pass


def backend_pids(dsn: str, application_name: str) -> list[int]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s",
            (application_name,),
        ).fetchall()
    return [int(r[0]) for r in rows]


def terminate(dsn: str, application_name: str) -> list[int]:
    """End the sessions of that name (as a server restart or an admin would)."""
    import psycopg

    pids = backend_pids(dsn, application_name)
    with psycopg.connect(dsn, autocommit=True) as conn:
        for pid in pids:
            conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    return pids


def leaves(error: BaseException) -> list[BaseException]:
    """The errors inside a group (a failed batch reaches both its waiter and the run)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    return [error]
