"""kill -9 at several points: nothing acknowledged is lost and the final report is exact."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from bench.durable_bench import Log, comparable, runner

import corral

from ..support import pg
from ..support.stepped_child import run_child_until

TASKS, TRIALS = 8, 2
KILL_AFTER = (4, 13, 29, 23, 17)  # acknowledged commits seen by each child before its kill


def run_child_until_killed(
    store: Path | str, log: Path, kill_after: int
) -> list[dict[str, object]]:
    """Start a child, let it acknowledge ``kill_after`` commits, then SIGKILL it."""
    return run_child_until(
        "tests.support.crash_child",
        [str(store), str(log), str(TASKS), str(TRIALS)],
        lambda acked: len(acked) == kill_after,
    )


def sqlite_rows(store: Path) -> list[tuple[str, int, int, str, str]]:
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = db.execute("SELECT task_id, trial, seq, kind, payload FROM commits").fetchall()
    db.close()
    return rows


def postgres_rows(dsn: str) -> list[tuple[str, int, int, str, str]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        query = "SELECT task_id, trial, seq, kind, payload FROM corral.commits"
        return conn.execute(query).fetchall()


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        yield tmp_path / "store.db"
    else:
        yield from pg.fresh_database()


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_kill9_at_several_points_then_finish(tmp_path: Path, where: Path | str) -> None:
    store, log = where, tmp_path / "log.jsonl"
    acked: list[dict[str, object]] = []
    for kill_after in KILL_AFTER:
        acked += await anyio.to_thread.run_sync(run_child_until_killed, store, log, kill_after)
    assert len(acked) == sum(KILL_AFTER)

    final = await runner(store, Log(log), TASKS).run(
        "crash", trials_per_task=TRIALS, k_values=(1, 2), max_parallel=3
    )
    reference = await runner(corral.MemoryStore(), Log(None), TASKS).run(
        "crash", trials_per_task=TRIALS, k_values=(1, 2), max_parallel=3
    )
    assert comparable(final) == comparable(reference)
    assert final.resumed > 0

    rows = postgres_rows(store) if isinstance(store, str) else sqlite_rows(store)
    stored = {(t, r, s, k) for t, r, s, k, _ in rows}
    lost = [a for a in acked if (a["task"], a["trial"], a["seq"], a["kind"]) not in stored]
    assert lost == []
    # Histories have no gaps and every trial is evaluated exactly once.
    by_trial: dict[tuple[str, int], list[int]] = {}
    for t, r, s, _, _ in rows:
        by_trial.setdefault((t, r), []).append(s)
    assert all(sorted(seqs) == list(range(len(seqs))) for seqs in by_trial.values())
    assert Counter(k for *_, k, _ in rows)["evaluation"] == TASKS * TRIALS

    entries = Log(log).read()
    recorded_keys = {json.loads(p)["step_key"] for *_, k, p in rows if k == "action"}
    executions = Counter(e["key"] for e in entries if e["kind"] == "execute")
    assert set(executions) == recorded_keys  # every step executed, under its stable key
    repeats = sum(n - 1 for n in executions.values())
    # Only what was in flight at a kill can run twice: 3 trials, up to 2 actions each.
    assert repeats <= len(KILL_AFTER) * 3 * 2
