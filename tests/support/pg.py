"""Fixtures for tests against a real PostgreSQL server: an empty database per test.

``CREATE DATABASE`` costs a third of a second (it copies and syncs a template), so
the tests share a few databases (`DatabasePool`): each test is given one no other
test holds, emptied when the test ends (its sessions ended, Corral's schema dropped,
its settings reset; on a thread, while the next test runs on another database); one
that cannot be emptied that way is dropped instead.

The server is the machine's (127.0.0.1:5432, user postgres, trust auth). Where
none is reachable the tests skip and say why, except under ``CI=true``, where
a missing server is a failure.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from typing import Any

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


class DatabasePool:
    """Databases of the tests' own, lent to one test at a time and emptied on return.

    A database given back is emptied on a thread of its own while the next test runs
    (on another database): it is lent again only once emptied, or dropped where it
    cannot be. Up to `SPARE` databases are made before a test waits for one."""

    #: Databases made before `take` waits for one being emptied (making one costs
    #: a third of a second, emptying one a tenth).
    SPARE = 2

    def __init__(self) -> None:
        self._free: list[str] = []
        self._made: list[str] = []
        self._emptying: list[threading.Thread] = []
        self._changed = threading.Condition()
        self._failed: list[BaseException] = []  # raised by the next take or close

    def take(self) -> str:
        with self._changed:
            while not self._free and self._emptying and len(self._made) >= self.SPARE:
                self._changed.wait()
            self._raise_failure()
            if self._free:
                return self._free.pop()
        name = create_database()
        with self._changed:
            self._made.append(name)
        return name

    def give_back(self, name: str) -> None:
        """Empty the database for a later test, or drop it where it cannot be."""
        thread = threading.Thread(target=self._empty, args=(name,), name=f"empty {name}")
        with self._changed:
            self._emptying.append(thread)
        thread.start()

    def _empty(self, name: str) -> None:
        emptied = False
        try:
            emptied = _emptied(name)
            if not emptied:
                drop_database(name)
        except BaseException as exc:
            with self._changed:
                self._failed.append(exc)
        finally:
            with self._changed:
                if emptied:
                    self._free.append(name)
                else:
                    self._made.remove(name)
                self._emptying.remove(threading.current_thread())
                self._changed.notify_all()

    def close(self) -> None:
        with self._changed:
            while self._emptying:
                self._changed.wait()
        for name in self._made:
            drop_database(name)
        self._made.clear()
        self._free.clear()
        self._raise_failure()

    def _raise_failure(self) -> None:
        if self._failed:
            raise self._failed.pop(0)


def _emptied(name: str) -> bool:
    import psycopg

    try:
        with psycopg.connect(_admin_dsn(), autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity "
                "WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )
            row = admin.execute(
                "SELECT datallowconn, EXISTS (SELECT 1 FROM pg_db_role_setting"
                "  WHERE setdatabase = d.oid) FROM pg_database d WHERE datname = %s",
                (name,),
            ).fetchone()
            if not (row and row[0]):
                return False
            if row[1]:  # a test's ALTER DATABASE ... SET (read-only transactions, ...)
                admin.execute(f'ALTER DATABASE "{name}" RESET ALL')
        with psycopg.connect(_admin_dsn(name), autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS corral CASCADE")
            return _is_empty(conn)
    except psycopg.Error:
        return False


def _is_empty(conn: Any) -> bool:
    """No schema but the built-in ones, no relation or function in ``public``, no
    prepared transaction."""
    row = conn.execute(
        "SELECT (SELECT count(*) FROM pg_namespace"
        "    WHERE nspname NOT IN ('public', 'information_schema') AND nspname !~ '^pg_')"
        " + (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        "    WHERE n.nspname = 'public')"
        " + (SELECT count(*) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace"
        "    WHERE n.nspname = 'public')"
        " + (SELECT count(*) FROM pg_prepared_xacts WHERE database = current_database())"
    ).fetchone()
    return bool(row) and row[0] == 0


@pytest.fixture(scope="session")
def pg_pool() -> Iterator[DatabasePool]:
    """The session's `DatabasePool`, its databases dropped at the end."""
    pool = DatabasePool()
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture(name="pg_dsn")
def pg_dsn(pg_pool: DatabasePool) -> Iterator[str]:
    """The URI of an empty database that only this test uses."""
    require_server()
    name = pg_pool.take()
    try:
        yield _admin_dsn(name)
    finally:
        pg_pool.give_back(name)


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


def writer_waits_on_a_lock(dsn: str) -> int:
    """The store's writer session's pid, once it waits on a lock a test holds (its
    batch stopped inside its transaction). Call in a thread: the event loop must
    stay free to hand the batch over."""
    [writer] = backend_pids(dsn, "corral writer")
    wait_for_server(
        dsn, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = %s AND NOT granted)", (writer,)
    )
    return writer


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
