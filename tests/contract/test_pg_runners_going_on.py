"""PostgreSQL claims and schema upgrades against runners that keep going: a claim
abandoned while it was being taken, and an older runner still writing when a newer
Corral upgrades the database."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from corral import PostgresStore
from corral.store._heads import head_of

from ..support import pg

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
pg_dsn = pg.pg_dsn

#: The last commit whose PostgreSQL schema is version 1 (before trial heads were kept).
_V1 = "6890d0c^"

_OLD_WRITER = textwrap.dedent(
    """
    import sys, anyio, corral

    K = corral.TrialKey("bench", "task", 0)

    def commit(seq, kind, payload):
        return corral.Commit(seq, kind, payload, created_at=1000.0 + seq)

    async def main():
        store = corral.PostgresStore(sys.argv[1])
        async with store.opened(), store.claim("bench"):
            await store.append(K, [commit(0, "setup", {"state": {}, "previous_trial": None})])
            print("claimed", flush=True)
            sys.stdin.readline()  # the newer Corral has opened (and upgraded) the store
            try:
                await store.append(K, [
                    commit(1, "terminal", {"status": "completed", "output": "done",
                                           "error": None, "attempts": 1, "state": {}}),
                    commit(2, "evaluation", {"score": 1.0, "passed": True, "details": {}}),
                ])
                print("appended", flush=True)
            except BaseException as exc:
                print("refused", type(exc).__name__, flush=True)
                raise

    try:
        anyio.run(main)
    except BaseException:
        pass
    """
)


@pytest.fixture
def older_corral(tmp_path: Path) -> Path:
    """The source of the last Corral of schema version 1, from this clone's history."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", _V1, "src/corral"], capture_output=True
    )
    if archive.returncode != 0:  # not a clone with its history (an sdist, a shallow clone)
        pytest.skip(f"the older Corral ({_V1}) is not in this checkout's history")
    subprocess.run(["tar", "-x", "-C", str(tmp_path)], input=archive.stdout, check=True)
    return tmp_path / "src"


def _older_writer(source: Path, dsn: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _OLD_WRITER, dsn],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(source)},
    )


@pytest.mark.slow  # starts a process running the older Corral
async def test_an_older_runner_still_writing_after_the_upgrade_leaves_no_trial_without_its_head(
    pg_dsn: str, older_corral: Path
) -> None:
    """A runner of schema version 1 (no heads) that is still running when a newer
    Corral upgrades the database must not land commits whose heads nobody writes:
    the report (read from the heads) would never count the trial it finished."""
    child = await anyio.to_thread.run_sync(_older_writer, older_corral, pg_dsn)
    try:
        assert child.stdout is not None and child.stdin is not None
        assert await anyio.to_thread.run_sync(child.stdout.readline) == "claimed\n"
        store = PostgresStore(pg_dsn)
        async with store.opened():  # upgrades the schema: heads rebuilt once
            child.stdin.write("go\n")
            child.stdin.flush()
            said = await anyio.to_thread.run_sync(child.stdout.readline)
            await anyio.to_thread.run_sync(child.wait)
            kept = [h async for chunk in store.heads("bench") for h in chunk]
            folded = [head_of(s) for s in await store.summaries("bench") if s.terminal]
            assert kept == folded, f"older runner said {said!r}"
    finally:
        child.kill()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # Task.cancel() is asyncio's
async def test_a_claim_cancelled_while_it_is_taken_is_not_left_held(pg_dsn: str) -> None:
    """asyncio's Task.cancel() (no cancel scope stops it) while a claim is being taken
    (here: its raise of the epoch waits for a lock): the thread taking it goes on and
    takes it; the store must not be left believing it holds a claim nobody holds, nor
    keep its advisory lock on a session nobody will close."""
    import asyncio
    import threading

    import psycopg

    from corral import BenchmarkBusyError

    store = PostgresStore(pg_dsn)
    finished = threading.Event()
    real = store._take_claim

    def take(benchmark_id: str, lock: int) -> psycopg.Connection:  # type: ignore[type-arg]
        try:
            return real(benchmark_id, lock)
        finally:
            finished.set()

    store._take_claim = take  # type: ignore[method-assign]
    async with store.opened():
        async with store.claim("bench"):
            pass
        finished.clear()
        with psycopg.connect(pg_dsn) as blocker:
            blocker.execute("SELECT * FROM corral.claims WHERE benchmark_id = 'bench' FOR UPDATE")

            async def run() -> None:
                async with store.claim("bench"):
                    await anyio.sleep_forever()

            task = asyncio.ensure_future(run())
            await anyio.to_thread.run_sync(
                pg.wait_for_server,
                pg_dsn,
                "SELECT EXISTS (SELECT 1 FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
                "WHERE a.application_name = 'corral claim' AND NOT l.granted)",
            )
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        # The blocker let go: the thread takes the claim on and returns.
        await anyio.to_thread.run_sync(finished.wait)
        problems = []
        if store.claim_epoch("bench") is not None:
            problems.append(f"the store still holds claim {store.claim_epoch('bench')}")
        # Its advisory lock is let go (the server's state: polled, not slept on).
        await anyio.to_thread.run_sync(
            pg.wait_for_server,
            pg_dsn,
            "SELECT NOT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))",
        )
        other = PostgresStore(pg_dsn)
        async with other.opened():
            try:
                async with other.claim("bench"):
                    pass
            except BenchmarkBusyError:
                problems.append("the cancelled claim's advisory lock is still held")
        assert problems == []
