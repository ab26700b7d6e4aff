"""Commits/s of Corral's SQLite store against raw ``sqlite3`` batched inserts.

``appenders`` concurrent trials each append ``commits`` commits one at a time
(as a trial's runtime does: one `await store.append(...)` per commit, waiting
for the acknowledgement), timed from the call to its return. The raw baseline
inserts the same rows (same JSON encoding, same schema read from the store's
own file, same pragmas: WAL, ``synchronous=NORMAL``) with ``executemany`` in
transactions of ``appenders`` rows (the largest batch the store can form when
each appender has one commit in flight), and in one transaction as a ceiling.

    python bench/commit_store.py [--appenders 64 --commits 500]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import corral

BENCHMARK = "store-bench"


def payload(trial: int, seq: int) -> dict[str, Any]:
    """A typical action commit's payload."""
    return {
        "tool": "step",
        "arguments": {"n": 1},
        "turn": seq // 2,
        "index": 0,
        "step_key": f"step-{trial:016x}{seq:016x}",
    }


async def corral_store(
    path: Path, appenders: int, commits: int, store: corral.CommitStore | None = None
) -> dict[str, Any]:
    store = corral.SQLiteStore(path) if store is None else store
    latencies: list[float] = []

    async def appender(trial: int) -> None:
        key = corral.TrialKey(BENCHMARK, f"task{trial}", 0)
        for seq in range(commits):
            commit = corral.Commit(seq, "action", payload(trial, seq), time.time())
            start = time.perf_counter()
            await store.append(key, [commit])
            latencies.append(time.perf_counter() - start)

    async with store.opened():
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for trial in range(appenders):
                tg.start_soon(appender, trial)
        wall = time.perf_counter() - start
    latencies.sort()
    n = len(latencies)
    return {
        "commits": n,
        "wall_s": wall,
        "commits_per_s": n / wall,
        "latency_p50_ms": latencies[n // 2] * 1e3,
        "latency_p99_ms": latencies[min(n - 1, int(n * 0.99))] * 1e3,
        "latency_mean_ms": statistics.fmean(latencies) * 1e3,
    }


def raw_sqlite(
    path: Path, schema: list[str], appenders: int, commits: int, batch: int
) -> dict[str, Any]:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    for sql in schema:
        conn.execute(sql)
    insert = (
        "INSERT INTO commits (benchmark_id, task_id, trial, seq, kind, payload, created_at, "
        "input_tokens, output_tokens, cost) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    )
    # The same order the store sees: round robin over the appenders.
    order = [(trial, seq) for seq in range(commits) for trial in range(appenders)]
    start = time.perf_counter()
    for i in range(0, len(order), batch):
        rows = [
            (
                BENCHMARK,
                f"task{trial}",
                0,
                seq,
                "action",
                json.dumps(payload(trial, seq), separators=(",", ":"), ensure_ascii=False),
                time.time(),
                0,
                0,
                0.0,
            )
            for trial, seq in order[i : i + batch]
        ]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(insert, rows)
        conn.execute("COMMIT")
    wall = time.perf_counter() - start
    conn.close()
    return {
        "commits": len(order),
        "batch": batch,
        "wall_s": wall,
        "commits_per_s": len(order) / wall,
    }


def schema_of(path: Path) -> list[str]:
    """The CREATE statements of the store's own tables, so the raw rows match exactly."""
    conn = sqlite3.connect(path)
    try:
        return [
            sql
            for (sql,) in conn.execute(
                "SELECT sql FROM sqlite_master WHERE type IN ('table', 'index') AND sql IS NOT NULL"
            )
        ]
    finally:
        conn.close()


def measure(appenders: int, commits: int) -> dict[str, Any]:
    """Both measurements in this process, the store first (it creates the schema)."""
    with tempfile.TemporaryDirectory() as tmp:
        store_path = Path(tmp) / "store.db"
        result: dict[str, Any] = {"appenders": appenders, "commits_per_appender": commits}
        result["corral"] = anyio.run(corral_store, store_path, appenders, commits)
        schema = schema_of(store_path)
        result["raw"] = raw_sqlite(Path(tmp) / "raw.db", schema, appenders, commits, appenders)
        result["raw_one_transaction"] = raw_sqlite(
            Path(tmp) / "raw1.db", schema, appenders, commits, appenders * commits
        )
    result["ratio_to_raw"] = result["corral"]["commits_per_s"] / result["raw"]["commits_per_s"]
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--appenders", type=int, default=64)
    parser.add_argument("--commits", type=int, default=500)
    args = parser.parse_args()
    print(json.dumps(measure(args.appenders, args.commits), indent=2))
