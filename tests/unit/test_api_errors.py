"""What ``run()`` raises is what a user catches: one error, never a group of the same one
that every waiting task heard."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

import corral
from corral import BenchmarkTaskMetadata, Final, SQLiteStore, StoreError
from corral.testing import FakeEnvironment, Gate, ScriptedAgent

from ..support import pg

pg_dsn = pg.pg_dsn

pytestmark = pytest.mark.anyio


class FillsUp(SQLiteStore):
    """The writer may grow the file by a few pages only: a disk that fills up."""

    def _configure_writer(self, writer: sqlite3.Connection) -> None:
        pages = writer.execute("PRAGMA page_count").fetchone()[0]
        writer.execute(f"PRAGMA max_page_count = {pages + 4}")


async def test_a_failed_batch_heard_by_every_trial_is_one_store_error(tmp_path: Path) -> None:
    # Every trial answers only once all of them are waiting to, so their large
    # terminal commits share the store's batch that the full disk refuses.
    count, gate, waiting = 8, Gate(), [0]

    async def decide(session: corral.AgentSession) -> Final:
        waiting[0] += 1
        if waiting[0] == count:
            gate.open()
        await gate.wait()
        return Final("x" * 20_000)

    tasks = {f"t{i}": BenchmarkTaskMetadata("a", "e") for i in range(count)}
    runner = corral.CorralRunner(
        tasks,
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=FillsUp(tmp_path / "s.db"),
    )
    with pytest.raises(StoreError, match="disk full"):
        await runner.run("b", max_parallel=count)


def waiting_agent(count: int, arrived: anyio.Event, gate: Gate) -> ScriptedAgent:
    """Answers once ``gate`` opens; sets ``arrived`` when all ``count`` trials wait."""
    waiting = [0]

    async def decide(session: corral.AgentSession) -> Final:
        waiting[0] += 1
        if waiting[0] == count:
            arrived.set()
        await gate.wait()
        return Final(session.task_id)

    return ScriptedAgent(decide)


async def test_a_run_fenced_off_after_losing_its_claim_raises_one_store_error(
    pg_dsn: str,
) -> None:
    count, arrived, gate, done = 6, anyio.Event(), Gate(), anyio.Event()
    tasks = {f"t{i}": BenchmarkTaskMetadata("a", "e") for i in range(count)}
    runner = corral.CorralRunner(
        tasks,
        {"a": waiting_agent(count, arrived, gate)},
        {"e": FakeEnvironment()},
        store=corral.PostgresStore(pg_dsn),
    )
    other = corral.PostgresStore(pg_dsn)

    async def take_over() -> None:
        await arrived.wait()
        # The runner's claim session ends (a partition the server gave up on) and
        # another runner claims the benchmark while every trial is about to commit.
        pg.terminate(pg_dsn, "corral claim")
        async with other.opened(), other.claim("b"):
            gate.open()
            await done.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(take_over)
        try:
            with pytest.raises(StoreError, match="claimed by another runner"):
                await runner.run("b", max_parallel=count)
        finally:
            done.set()


def test_a_group_folds_into_its_distinct_errors_in_order() -> None:
    from corral._errors import distinct_leaves

    a, b = StoreError("disk full"), StoreError("disk full")
    group = ExceptionGroup("run", [ExceptionGroup("inner", [a]), b, ValueError("other")])
    assert distinct_leaves(group) == [a, group.exceptions[2]]
    assert distinct_leaves(a) == [a]
