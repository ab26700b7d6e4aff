"""PostgresStore under faults: a writer's session ended mid-batch, a COMMIT whose outcome
was lost, a lasting outage. Nothing acknowledged is lost, nothing lands twice, and a
retry never turns into a false conflict."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import anyio
import psycopg
import pytest

from corral import PostgresStore, StoreError
from corral.store import _pg_schema
from corral.store._pg_writer import PgWriter

from ..contract.test_store import K, trial
from ..support import pg
from ..support.pg import (
    leaves,
    terminate,
    wait_for_server,
    writer_waits_on_a_lock,
)

pytestmark = pytest.mark.anyio
pg_dsn = pg.pg_dsn


async def test_a_commit_whose_outcome_was_lost_is_not_written_twice(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = PgWriter._transaction
    drops = [1]

    def committed_then_dropped(
        self: PgWriter, conn: psycopg.Connection[Any], benchmarks: Collection[str], rows: Any
    ) -> None:
        real(self, conn, benchmarks, rows)  # the server committed...
        if drops:
            drops.pop()
            conn.close()  # ...and the connection died before the client heard it
            raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(PgWriter, "_transaction", committed_then_dropped)
    store = PostgresStore(pg_dsn)
    async with store.opened():
        await store.append(K, trial()[:3])  # no CommitConflictError from the retry
        await store.append(K, trial()[3:])
        assert await store.history(K) == trial()
    assert not drops


async def test_the_writer_terminated_during_a_batch(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn)
    async with store.opened(), store.claim("bench"):
        await store.append(K, trial()[:1])
        with psycopg.connect(pg_dsn) as blocker:
            # Holds the claim row, so the writer's next batch waits inside its transaction.
            blocker.execute("SELECT * FROM corral.claims FOR UPDATE")
            pending = [store.enqueue(K._replace(trial=t), trial()) for t in range(1, 4)]
            pending.append(store.enqueue(K, trial()[1:]))
            await anyio.to_thread.run_sync(writer_waits_on_a_lock, pg_dsn)
            terminate(pg_dsn, "corral writer")
            blocker.rollback()
        for p in pending:
            await p.wait()  # ridden through: reconnected, checked, written once
        for t in range(4):
            assert await store.history(K._replace(trial=t)) == trial()
    # Closed on the way out: the server ends the session once it reads the closed socket.
    wait_for_server(
        pg_dsn,
        "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE application_name = %s "
        "AND datname = current_database())",
        ("corral writer",),
    )


async def test_the_writer_terminated_as_the_store_opens_is_ridden_through(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A session ended while the store opens (its schema made or checked: a server
    restart, a failover, an admin) is retried as one ended mid-run is. Before, the run
    failed at once with "terminating connection due to administrator command"."""
    real = _pg_schema.ensure_schema
    ended: list[int] = []

    def terminated_first(conn: psycopg.Connection[Any], where: str) -> None:
        if not ended:
            ended.append(conn.info.backend_pid)
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", (ended[0],))
        real(conn, where)

    monkeypatch.setattr(_pg_schema, "ensure_schema", terminated_first)
    store = PostgresStore(pg_dsn)
    async with store.opened():
        await store.append(K, trial())
        assert await store.history(K) == trial()
    assert ended


async def test_the_claim_session_terminated_as_it_is_taken_is_ridden_through(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim's session ended after it took the lock, before the epoch was raised:
    the claim is taken again on a new session, not refused as the run's end ("cannot
    claim ...: terminating connection due to administrator command"), nor as busy
    (the lock its dead session held)."""
    real = PostgresStore._fence_writers
    ended: list[int] = []

    def terminated_first(self: PostgresStore, conn: psycopg.Connection[Any], bench: str) -> None:
        if not ended:
            ended.append(conn.info.backend_pid)
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", (ended[0],))
        real(self, conn, bench)

    monkeypatch.setattr(PostgresStore, "_fence_writers", terminated_first)
    store = PostgresStore(pg_dsn)
    async with store.opened(), store.claim("bench"):
        await store.append(K, trial())
        assert store.claim_epoch("bench") == 1
        assert await store.history(K) == trial()
    assert ended


async def test_a_claim_session_lost_but_alive_at_the_server_is_ended_before_the_retry(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim session lost to the client that the server still has (a dead peer is
    noticed late) holds the lock: the retry ends it first rather than read the lock as
    another runner's (`BenchmarkBusyError`)."""
    real = PostgresStore._fence_writers
    lost: list[psycopg.Connection[Any]] = []

    def lost_first(self: PostgresStore, conn: psycopg.Connection[Any], bench: str) -> None:
        if not lost:
            lost.append(conn)
            monkeypatch.setattr(conn, "close", lambda: None)  # the session lives on
            raise psycopg.OperationalError("consuming input failed: server closed the connection")
        real(self, conn, bench)

    monkeypatch.setattr(PostgresStore, "_fence_writers", lost_first)
    store = PostgresStore(pg_dsn)
    try:
        async with store.opened(), store.claim("bench"):
            await store.append(K, trial())
        assert lost
        assert pg.backend_pids(pg_dsn, "corral claim") == []
    finally:
        for conn in lost:
            psycopg.Connection.close(conn)


class _PidOf:
    """A session's `ConnectionInfo` that reports another server pid (``pid``)."""

    def __init__(self, info: Any, pid: int):
        self._info, self.backend_pid = info, pid

    def __getattr__(self, name: str) -> Any:
        return getattr(self._info, name)


async def test_a_failed_claim_session_whose_pid_was_reused_ends_no_other_runners_claim(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The claim's session failed and ended; its pid is then another live session's (a
    server restarted in a container counts pids from 1 again), here another runner's
    claim. Before, the retry ended that session by pid: the other runner lost its claim
    (or, under another role, this run failed: "must be a superuser to terminate ...")."""
    other = PostgresStore(pg_dsn)
    store = PostgresStore(pg_dsn)
    async with other.opened(), other.claim("other"):
        [held] = pg.backend_pids(pg_dsn, "corral claim")
        real_connection, real_info = PostgresStore._connection, psycopg.Connection.info
        failed: list[psycopg.Connection[Any]] = []

        def connection(self: PostgresStore, **options: Any) -> psycopg.Connection[Any]:
            conn = real_connection(self, **options)
            if self is store and options.get("application_name") == "corral claim":
                failed.append(conn)  # the first fails; its pid is ``held``'s
            return conn

        def info(conn: psycopg.Connection[Any]) -> Any:
            got = real_info.fget(conn)  # type: ignore[attr-defined]
            return _PidOf(got, held) if failed and conn is failed[0] else got

        real_fence = PostgresStore._fence_writers

        def ended_first(self: PostgresStore, conn: psycopg.Connection[Any], bench: str) -> None:
            if conn is failed[0]:
                conn.close()
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            real_fence(self, conn, bench)

        monkeypatch.setattr(PostgresStore, "_connection", connection)
        monkeypatch.setattr(psycopg.Connection, "info", property(info))
        monkeypatch.setattr(PostgresStore, "_fence_writers", ended_first)
        async with store.opened(), store.claim("bench"):
            await store.append(K, trial())
        assert len(failed) == 2
        assert held in pg.backend_pids(pg_dsn, "corral claim")  # the other claim lives on
        await other.append(K._replace(benchmark_id="other"), trial())


async def test_a_lasting_outage_is_a_store_error_and_keeps_what_was_acknowledged(
    pg_dsn: str,
) -> None:
    database = pg_dsn.rsplit("/", 1)[1]
    admin = pg_dsn.rsplit("/", 1)[0] + "/postgres"
    store = PostgresStore(pg_dsn, retry_for=0.5)
    try:
        with pytest.raises((StoreError, ExceptionGroup)) as caught:
            async with store.opened():
                await store.append(K, trial()[:2])
                with psycopg.connect(admin, autocommit=True) as conn:
                    conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
                terminate_all(admin, database)
                await store.append(K, trial()[2:])
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')
    assert all(
        isinstance(e, StoreError) and "stayed unreachable" in str(e) for e in leaves(caught.value)
    )
    again = PostgresStore(pg_dsn)
    async with again.opened():
        assert await again.history(K) == trial()[:2]


def terminate_all(admin: str, database: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = %s",
            (database,),
        )
