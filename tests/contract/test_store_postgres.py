"""PostgresStore beyond the shared contract: schema, claims across processes, fencing, runs."""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import psycopg
import pytest
from bench.durable_bench import Log, comparable, runner
from psycopg import sql

import corral
from corral import (
    BenchmarkBusyError,
    ConfigError,
    MemoryStore,
    PostgresStore,
    StoreError,
    TrialKey,
)
from corral._runner import _store
from corral.store import RunRecord, _pg_writer
from corral.store._heads import head_of
from corral.testing import wait_all_tasks_blocked

from ..support import pg
from ..support.pg import (
    backend_pids,
    leaves,
    terminate,
    wait_for_server,
    writer_waits_on_a_lock,
)
from .test_store import CONFIG, K, listed, overview_config, trial

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]
pg_dsn = pg.pg_dsn  # a database of each test's own


async def test_appends_survive_reopening_and_a_uri_string_is_a_postgres_store(
    pg_dsn: str,
) -> None:
    first = _store(pg_dsn)
    assert isinstance(first, PostgresStore)
    async with first.opened():
        await first.register_benchmark("bench", CONFIG)
        await first.append(K, trial())
    again = PostgresStore(pg_dsn.replace("postgresql://", "postgres://"))
    async with again.opened():
        assert await again.history(K) == trial()
        assert await again.register_benchmark("bench", CONFIG) is True
        assert [s.commits for s in await again.summaries("bench")] == [5]


async def test_a_newer_schema_is_refused(pg_dsn: str) -> None:
    async with PostgresStore(pg_dsn).opened():
        pass
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE corral.meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 99, newer than"):
        async with PostgresStore(pg_dsn).opened():
            pass


async def test_a_newer_schema_is_refused_before_anything_is_written(pg_dsn: str) -> None:
    """A newer Corral may drop a table or keep no overviews: the refusal changed it
    first (the table made again, the overview written back) and only then refused."""
    store = PostgresStore(pg_dsn)
    async with store.opened():
        await store.register_benchmark("bench", CONFIG)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE corral.meta SET value = '3' WHERE key = 'schema_version'")
        conn.execute("DROP TABLE corral.claim_writers")
        conn.execute("DELETE FROM corral.benchmark_overviews")
    with pytest.raises(StoreError, match="schema version 3, newer than"):
        async with PostgresStore(pg_dsn).opened():
            pass
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        found = conn.execute("SELECT to_regclass('corral.claim_writers')").fetchone()
        assert found == (None,)
        assert conn.execute("SELECT * FROM corral.benchmark_overviews").fetchall() == []


def test_a_uri_of_another_database_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="mysql://x/y"):
        PostgresStore("mysql://x/y")


@pytest.fixture
def no_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    def retried(seconds: float) -> None:
        raise AssertionError(f"retried (backoff {seconds} s) an error no retry can fix")

    monkeypatch.setattr(_pg_writer.time, "sleep", retried)


@pytest.mark.parametrize(
    ("option", "named"),
    [("sslmode=nonsense-x", 'sslmode value: "nonsense-x"'), ("port=99999", "port number")],
)
def test_a_bad_connection_option_is_a_config_error_at_once(
    pg_dsn: str, option: str, named: str, no_retries: None
) -> None:
    # libpq checks these values only when connecting: refused there, never retried.
    with pytest.raises(ConfigError, match=re.escape(named)):
        anyio.run(_open, PostgresStore(f"{pg_dsn}?{option}"))


async def _open(store: PostgresStore) -> None:
    async with store.opened():
        pass


def test_a_password_never_reaches_a_message() -> None:
    assert "secret" not in repr(PostgresStore("postgresql://me:secret@h/db"))


def test_append_ids_are_new_for_every_append_and_differ_between_stores() -> None:
    """What tells an append that landed before a lost COMMIT from another writer's
    (`PgWriter._landed`): never reused by a store, nor shared by two stores."""
    first, second = PostgresStore("postgresql://h/db"), PostgresStore("postgresql://h/db")
    ids = [next(first._append_ids) for _ in range(1000)]
    others = [next(second._append_ids) for _ in range(1000)]
    assert len(set(ids)) == 1000
    assert not set(ids) & set(others)


async def test_a_second_store_gets_benchmark_busy(pg_dsn: str) -> None:
    one, two = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    async with one.opened(), two.opened():
        async with one.claim("bench"):
            with pytest.raises(BenchmarkBusyError, match="another live runner"):
                async with two.claim("bench"):
                    pass
            async with two.claim("other"):  # other benchmarks are free
                await two.append(K._replace(benchmark_id="other"), trial())
        async with two.claim("bench"):
            await two.append(K, trial())


async def test_a_fenced_off_writer_cannot_append(pg_dsn: str) -> None:
    old, new = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    async with new.opened():
        # A failed write batch ends the run that holds the store open (the waiting
        # append and the flush loop may both report it).
        with pytest.raises((StoreError, ExceptionGroup)) as caught:
            async with old.opened(), old.claim("bench"):
                await old.append(K, trial()[:2])
                # The old runner's session ends (a partition the server gave up on)
                # and a new runner claims the benchmark while the old one still runs.
                terminate(pg_dsn, "corral claim")
                async with new.claim("bench"):
                    await old.append(K, trial()[2:])
        errors = leaves(caught.value)
        assert all(
            isinstance(e, StoreError) and "claimed by another runner" in str(e) for e in errors
        )
        assert await new.history(K) == trial()[:2]
        async with new.claim("bench"):
            await new.append(K, trial()[2:])
        assert await new.history(K) == trial()


@pytest.mark.parametrize("folded", [True, False], ids=["folded", "refolded"])
async def test_a_fenced_off_batch_writes_neither_commits_nor_heads(
    pg_dsn: str, folded: bool
) -> None:
    """Both ways a batch is written: one statement (the writer folded the trial from
    its start) and a transaction that refolds the head from the store (it did not)."""
    old, new = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    async with new.opened():
        if not folded:
            async with new.claim("bench"):
                await new.append(K, trial()[:2])
        with pytest.raises((StoreError, ExceptionGroup)) as caught:
            async with old.opened(), old.claim("bench"):
                if folded:
                    await old.append(K, trial()[:2])
                terminate(pg_dsn, "corral claim")
                async with new.claim("bench"):
                    await old.append(K, trial()[2:])  # ends the trial: its head changes
        assert all("claimed by another runner" in str(e) for e in leaves(caught.value))
        assert await new.history(K) == trial()[:2]
        assert [h async for chunk in new.heads("bench") for h in chunk] == []
        async with new.claim("bench"):
            await new.append(K, trial()[2:])
        [[head]] = [chunk async for chunk in new.heads("bench")]
        assert (head.task_id, head.done, head.passed) == ("task", True, True)


_HOLD_CLAIM = textwrap.dedent(
    """
    import sys, anyio, corral

    async def main():
        store = corral.PostgresStore(sys.argv[1])
        async with store.opened(), store.claim("bench"):
            print("claimed", flush=True)
            await anyio.sleep_forever()

    anyio.run(main)
    """
)


def _start(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )


@pytest.mark.slow  # starts a process: a system test
async def test_a_claim_held_by_a_killed_process_does_not_block(pg_dsn: str) -> None:
    child = _start(_HOLD_CLAIM, pg_dsn)
    try:
        assert child.stdout is not None
        assert await anyio.to_thread.run_sync(child.stdout.readline) == "claimed\n"
        # The child's session, read before our own refused claim adds a session that
        # may linger a moment after it closed.
        [pid] = backend_pids(pg_dsn, "corral claim")
        store = PostgresStore(pg_dsn)
        async with store.opened():
            with pytest.raises(BenchmarkBusyError):
                async with store.claim("bench"):
                    pass
            child.send_signal(signal.SIGKILL)
            await anyio.to_thread.run_sync(child.wait)
            # The server ends the session once it reads the closed socket.
            wait_for_server(
                pg_dsn, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)", (pid,)
            )
            async with store.claim("bench"):
                await store.append(K, trial())
    finally:
        child.kill()
        child.wait()


async def test_a_run_and_its_resume_on_postgres_equal_a_memory_run(pg_dsn: str) -> None:
    class StopAfter:
        """Cancels the first run after a few acknowledged commits."""

        def __init__(self, scope: anyio.CancelScope, after: int) -> None:
            self.scope, self.left = scope, after

        def on_commit(self, key: TrialKey, commit: corral.Commit) -> None:
            self.left -= 1
            if self.left == 0:
                self.scope.cancel()

    args = {"trials_per_task": 2, "k_values": (1, 2), "max_parallel": 4}
    with anyio.CancelScope() as scope:
        await runner(pg_dsn, Log(None), 6).run("pg", observers=[StopAfter(scope, 40)], **args)
    assert scope.cancelled_caught
    final = await runner(pg_dsn, Log(None), 6).run("pg", **args)
    reference = await runner(MemoryStore(), Log(None), 6).run("pg", **args)
    assert final.resumed > 0
    assert comparable(final) == comparable(reference)
    store = PostgresStore(pg_dsn)
    async with store.opened():
        [info] = await store.benchmarks()
        assert (info.benchmark_id, info.trials, info.finished) == ("pg", 12, 12)


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://me@h/db?password=secret",
        "postgresql://me@h/db?sslmode=require&password=secret&retry_for=x",
        "postgresql://me:secret@h/db?application_name=a@b",
    ],
)
def test_a_password_in_the_query_never_reaches_a_message_either(dsn: str) -> None:
    try:
        assert "secret" not in repr(PostgresStore(dsn))
    except ConfigError as exc:  # the bad retry_for: its message names the URI too
        assert "secret" not in str(exc)


async def test_many_trials_ending_in_one_batch_keep_their_heads(pg_dsn: str) -> None:
    """A batch that ends many trials at once refolds their heads in its transaction
    (the heads' scan once read the inserts' result in pipeline mode: 'the last
    operation didn't produce records (command status: INSERT 0 1)')."""
    from corral import BenchmarkTaskMetadata, Final
    from corral.testing import FakeEnvironment, ScriptedAgent

    n = 600
    metadata = {f"t{i:04}": BenchmarkTaskMetadata("a", "e") for i in range(n)}
    run = corral.CorralRunner(
        metadata,
        {"a": ScriptedAgent(lambda s: Final(1))},
        {"e": FakeEnvironment()},
        store=pg_dsn,
    )
    report = await run.run("many", max_parallel=64)
    assert report.counts["completed"] == n == report.finished
    store = PostgresStore(pg_dsn)
    async with store.opened():
        [info] = await store.benchmarks()
        assert (info.trials, info.finished) == (n, n)


def test_list_reads_the_overview_kept_with_a_configuration_while_it_is_unchanged(
    pg_dsn: str,
) -> None:
    """``corral list`` reads each benchmark's task count from the overview written with
    its configuration, not from the configuration's JSON, but only while the text is
    the one it was counted from; a database written before overviews were kept gets
    them on its first writable open, and is read right without them."""
    from corral._json import dumps
    from corral.history import ConfigStream

    config = overview_config

    async def overview(read_only: bool = True) -> list[tuple[str, int, int]]:
        return await listed(corral.PostgresStore(pg_dsn, read_only=read_only))

    async def register() -> None:
        store = corral.PostgresStore(pg_dsn)
        async with store.opened():
            await store.register_benchmark("a", config(4))
            await store.register_benchmark("b", ConfigStream(2, lambda: iter([])))

    anyio.run(register)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        kept = conn.execute(
            "SELECT benchmark_id, trials_per_task, tasks FROM corral.benchmark_overviews "
            "ORDER BY benchmark_id"
        ).fetchall()
        assert kept == [("a", 3, 4), ("b", 2, 0)]
        assert anyio.run(overview) == [("a", 4, 3), ("b", 0, 2)]
        # The kept figures are not read once the text changed (here by hand).
        conn.execute(
            "UPDATE corral.benchmarks SET config = %s WHERE benchmark_id = 'a'",
            (dumps(config(6)),),
        )
        assert anyio.run(overview) == [("a", 6, 3), ("b", 0, 2)]
        # Older code keeps none: read from the text, until a writable open keeps them.
        conn.execute("DROP TABLE corral.benchmark_overviews")
        assert anyio.run(overview) == [("a", 6, 3), ("b", 0, 2)]
        assert anyio.run(overview, False) == [("a", 6, 3), ("b", 0, 2)]
        kept = conn.execute(
            "SELECT benchmark_id, trials_per_task, tasks FROM corral.benchmark_overviews "
            "ORDER BY benchmark_id"
        ).fetchall()
        assert kept == [("a", 3, 6), ("b", 2, 0)]


async def test_heads_are_read_down_the_index_before_the_table_was_ever_analyzed(
    pg_dsn: str,
) -> None:
    """A table a run just wrote has no statistics (autovacuum off, or not yet come):
    the planner then sorted every head after the key for each chunk of a report
    (88 ms against 2 ms a chunk at 100,000 trials). Each chunk walks the index."""
    from corral.store import postgres

    store = PostgresStore(pg_dsn)
    async with store.opened():
        await store.register_benchmark("bench", CONFIG)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("ALTER TABLE corral.trial_heads SET (autovacuum_enabled = false)")
        conn.execute(
            "INSERT INTO corral.trial_heads (benchmark_id, task_id, trial, next_seq, done, "
            "status, passed, attempts, commits, input_tokens, output_tokens, cost) "
            "SELECT 'bench', 't' || lpad(i::text, 6, '0'), 0, 5, 1, 'completed', 1, 1, 5, 0, "
            "0, 0 "
            "FROM generate_series(1, 20000) i"
        )
        analyzed = conn.execute(
            "SELECT last_analyze, last_autoanalyze FROM pg_stat_user_tables "
            "WHERE relname = 'trial_heads'"
        ).fetchone()
        assert analyzed == (None, None)
    async with store.opened():
        plan = await store._read_chunk("EXPLAIN " + postgres._HEADS, ("bench", "t010000", 0, 8192))
        assert "Sort" not in "\n".join(line for (line,) in plan)
        assert sum([len(chunk) async for chunk in store.heads("bench")]) == 20000


async def test_one_batch_of_many_appends_to_the_same_trials_keeps_their_heads(
    pg_dsn: str,
) -> None:
    """A batch is one statement per table: a trial appended to several times in it, or
    refolded from the store (its start written by another store), gets one head, the
    fold of all its commits."""
    commits = trial()
    resumed, reopened = K._replace(trial=1), K._replace(task_id="reopened")
    store = PostgresStore(pg_dsn)
    async with store.opened():  # another writer began this trial
        await store.append(resumed, commits[:2])
    store = PostgresStore(pg_dsn)
    async with store.opened(), store.claim("bench"):
        await store.append(K._replace(task_id="first"), commits)
        with psycopg.connect(pg_dsn) as blocker:
            # Holds the claim row: the writer's next batch waits inside its transaction,
            # so every append handed over meanwhile goes into the one batch after it.
            blocker.execute("SELECT * FROM corral.claims FOR UPDATE")
            slots = [store.enqueue(K._replace(task_id="waiting"), commits)]
            await anyio.to_thread.run_sync(writer_waits_on_a_lock, pg_dsn)
            slots += [store.enqueue(K, [c]) for c in commits]  # known to the writer
            slots.append(store.enqueue(resumed, commits[2:4]))  # refolded from the store
            slots.append(store.enqueue(resumed, commits[4:]))
            # Ended (its head made by the writer), then reopened (refolded): two heads.
            slots.append(store.enqueue(reopened, commits))
            reopen = corral.Commit(len(commits), "reopen", {"reason": "rerun"}, 2000.0)
            slots.append(store.enqueue(reopened, [reopen]))
            blocker.rollback()
        for slot in slots:
            await slot.wait()
        heads = {(h.task_id, h.trial): h async for chunk in store.heads("bench") for h in chunk}
        last = heads.pop(("reopened", 0))
        # Its ended attempt stands (done) until the reopened one ends.
        assert (last.done, last.next_seq) == (True, len(commits) + 1)
        summaries = await store.summaries("bench")
        assert last == head_of(next(s for s in summaries if s.task_id == "reopened"))
        folded = [head_of(s) for s in summaries if s.terminal is not None]
        assert list(heads.values()) == folded
        assert len(folded) == 4 and all(h.done for h in folded)


def _scored(score: float, *, whole: bool = False) -> list[corral.Commit]:
    """`trial` with its evaluation's score (an int or a float, as a scorer gives it);
    ``whole``: its times and costs as ints too (the store's API takes them so)."""
    *rest, evaluation = trial()
    scored = dataclasses.replace(evaluation, payload={**evaluation.payload, "score": score})
    commits = [*rest, scored]
    if whole:
        commits = [
            dataclasses.replace(
                c,
                created_at=int(c.created_at),
                usage=dataclasses.replace(c.usage, cost=int(c.usage.cost + 1)),
            )
            for c in commits
        ]
    return commits


async def test_one_batch_of_ints_and_floats_lands(pg_dsn: str) -> None:
    """A batch goes as one typed array a column, and psycopg refuses a list of ints and
    floats ('cannot dump lists of mixed types'): two trials scored 1 and 0.5 in one
    batch failed it, and the run with it; so did commits timed or costed in ints
    beside others in floats."""
    store = PostgresStore(pg_dsn)
    async with store.opened(), store.claim("bench"):
        with psycopg.connect(pg_dsn) as blocker:
            blocker.execute("SELECT * FROM corral.claims FOR UPDATE")  # the next batch waits
            slots = [store.enqueue(K._replace(task_id="first"), trial())]
            await anyio.to_thread.run_sync(writer_waits_on_a_lock, pg_dsn)
            for task_id, commits in (("i", _scored(1, whole=True)), ("f", _scored(0.5))):
                slots.append(store.enqueue(K._replace(task_id=task_id), commits))
            blocker.rollback()
        for slot in slots:
            await slot.wait()
        heads = {h.task_id: h async for chunk in store.heads("bench") for h in chunk}
        assert await store.history(K._replace(task_id="i")) == _scored(1, whole=True)
    assert {t: h.score for t, h in heads.items()} == {"first": 1.0, "i": 1.0, "f": 0.5}
    assert all(type(h.score) is type(h.started_at) is float for h in heads.values())


async def test_what_a_claim_handed_over_is_written_under_it_before_it_ends(
    pg_dsn: str,
) -> None:
    """A claim ends only once everything handed over under it has been written, under
    its fence: an append still queued as it ended was written without the fence, after
    the claim could be another runner's (the epoch was forgotten, the lock let go)."""
    store = PostgresStore(pg_dsn)
    async with store.opened(), store.claim("x"), anyio.create_task_group() as tg:
        claimed, leave = anyio.Event(), anyio.Event()

        async def hold() -> None:
            async with store.claim("bench"):
                claimed.set()
                await leave.wait()

        tg.start_soon(hold)
        await claimed.wait()
        with psycopg.connect(pg_dsn) as blocker:
            # The writer waits inside its batch for "x": the append to "bench" is
            # in the batch after it, still queued as that claim ends.
            blocker.execute("SELECT * FROM corral.claims WHERE benchmark_id = 'x' FOR UPDATE")
            first = store.enqueue(K._replace(benchmark_id="x"), trial())
            await anyio.to_thread.run_sync(writer_waits_on_a_lock, pg_dsn)
            slot = store.enqueue(K, trial())
            leave.set()
            await wait_all_tasks_blocked()  # the claim has ended as far as it can
            # Another runner takes "bench" over meanwhile.
            blocker.execute(
                "UPDATE corral.claims SET epoch = epoch + 1 WHERE benchmark_id = 'bench'"
            )
            blocker.commit()
        await first.wait()
        with pytest.raises(StoreError, match="claimed by another runner"):
            await slot.wait()
    async with store.opened():
        assert await store.history(K) == []


async def test_a_runner_whose_claim_was_taken_over_records_no_run(pg_dsn: str) -> None:
    store = PostgresStore(pg_dsn)
    async with store.opened(), store.claim("bench"):
        await store.register_benchmark("bench", CONFIG)
        with psycopg.connect(pg_dsn, autocommit=True) as other:
            other.execute("UPDATE corral.claims SET epoch = epoch + 1")
        record = RunRecord("run", 1.0, 2.5, ("task",))
        with pytest.raises(StoreError, match="claimed by another runner"):
            await store.record_run("bench", record)
        assert await store.runs("bench") == []


async def test_a_run_whose_claim_was_taken_over_starts_no_more_trials(pg_dsn: str) -> None:
    """Once its write is fenced off, a run stops: every trial it started after that
    would run again under the new claim (executed by both runners)."""

    class TakeOver:
        """Another runner takes the claim at the run's first acknowledged commit."""

        def __init__(self) -> None:
            self.taken = False

        def on_commit(self, key: TrialKey, commit: corral.Commit) -> None:
            if not self.taken:
                self.taken = True
                terminate(pg_dsn, "corral claim")
                with psycopg.connect(pg_dsn, autocommit=True) as other:
                    other.execute("UPDATE corral.claims SET epoch = epoch + 1")

    log = Log(None)
    with pytest.raises((StoreError, ExceptionGroup)) as caught:
        await runner(pg_dsn, log, 6).run(
            "pg", trials_per_task=1, k_values=(1,), max_parallel=1, observers=[TakeOver()]
        )
    assert all("claimed by another runner" in str(e) for e in leaves(caught.value))
    assert {line["task"] for line in log.read()} == {"task-000"}


async def test_a_claim_taken_over_fences_off_its_benchmark_alone(pg_dsn: str) -> None:
    """Two runs sharing one store, on two benchmarks: the one whose claim was taken
    over is refused; the other, whose claim holds, goes on writing."""
    store, new = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    other = K._replace(benchmark_id="other")
    async with new.opened(), store.opened(), store.claim("other"):
        holding_other = set(backend_pids(pg_dsn, "corral claim"))
        with pytest.raises(StoreError, match="claimed by another runner"):
            async with store.claim("bench"):
                await store.append(K, trial()[:2])
                [pid] = set(backend_pids(pg_dsn, "corral claim")) - holding_other
                with psycopg.connect(pg_dsn, autocommit=True) as admin:
                    admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
                async with new.claim("bench"):
                    await store.append(K, trial()[2:])
        await store.append(other, trial())
        assert await store.history(other) == trial()


async def test_acknowledged_commits_are_durable_where_the_server_defaults_to_async(
    pg_dsn: str,
) -> None:
    """A database (or role, or server) set to ``synchronous_commit = off`` (a DBA's
    speed-up) must not make a store opened with the default (``synchronous_commit=True``)
    acknowledge commits the server may lose: every session that writes commits
    synchronously."""
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        database = pg_dsn.rsplit("/", 1)[1]
        admin.execute(
            sql.SQL("ALTER DATABASE {} SET synchronous_commit = off").format(
                sql.Identifier(database)
            )
        )
    store = PostgresStore(pg_dsn)
    async with store.opened(), store.claim("bench"):
        await store.register_benchmark("bench", CONFIG)
        await store.append(K, trial())
        assert store._writer is not None and store._writer.conn is not None
        assert store._writer.conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
        assert store._pool is not None
        with store._pool.connection() as conn:  # registers, records runs
            assert conn.execute("SHOW synchronous_commit").fetchone() == ("on",)
    fast = PostgresStore(pg_dsn, synchronous_commit=False)
    async with fast.opened():
        assert fast._writer is not None and fast._writer.conn is not None
        assert fast._writer.conn.execute("SHOW synchronous_commit").fetchone() == ("off",)


async def test_a_claim_outlives_an_idle_session_timeout_of_the_database(pg_dsn: str) -> None:
    """A database (or role) set to end idle sessions (``idle_session_timeout``, a DBA's
    clean-up) must not end the claim's session, idle for the whole run: the server
    would drop its lock and a second runner would claim the benchmark too."""
    database = pg_dsn.rsplit("/", 1)[1]
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(
            sql.SQL("ALTER DATABASE {} SET idle_session_timeout = 50").format(
                sql.Identifier(database)
            )
        )
    one, two = PostgresStore(pg_dsn), PostgresStore(pg_dsn)
    async with one.opened(), one.claim("bench"):
        [claim] = backend_pids(pg_dsn, "corral claim")
        # A session idle since after the claim's went idle: once the server ended it,
        # it would have ended the claim's too.
        with psycopg.connect(pg_dsn, autocommit=True, application_name="canary") as canary:
            canary.execute("SELECT 1")
            [pid] = backend_pids(pg_dsn, "canary")
            wait_for_server(
                pg_dsn, "SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = %s)", (pid,)
            )
        assert backend_pids(pg_dsn, "corral claim") == [claim]
        async with two.opened():
            with pytest.raises(BenchmarkBusyError, match="another live runner"):
                async with two.claim("bench"):
                    pass
        await one.append(K, trial())


async def test_an_id_too_long_for_the_index_fails_at_once_and_says_so(
    pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A task id past what a btree index entry holds (about 2.7 kB) is refused by the
    server every time: not retried for ``retry_for`` as if the database were down, nor
    reported as 'unreachable'."""
    long = "".join(chr(ord("a") + (n * 7919 % 26)) + str(n) for n in range(1000))
    store = PostgresStore(pg_dsn, retry_for=0.5)
    with pytest.raises((StoreError, ExceptionGroup)) as caught:
        async with store.opened():
            await store.append(K._replace(task_id=long), trial())
    errors = leaves(caught.value)
    assert all(isinstance(e, StoreError) and "index row size" in str(e) for e in errors)
    assert not any("unreachable" in str(e) for e in errors)
    assert not [r for r in caplog.records if "retrying" in r.getMessage()]
