"""PostgresStore: commits/s from concurrent appenders against raw psycopg, and trials/s.

``appenders`` concurrent trials each append ``commits`` commits one at a time,
waiting for each acknowledgement (as a trial's runtime does). The raw baseline
inserts the same rows into the store's own table with psycopg ``executemany``
in transactions of ``appenders`` rows. Then N instant one-step trials (L = 0)
run through CorralRunner on Postgres and on SQLite. Each measurement uses a
fresh database on the server, dropped afterwards.

    python bench/postgres_store.py [--server postgresql://postgres@127.0.0.1:5432]
        [--appenders 64 --commits 200 --trials 10000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import psycopg

import corral

sys.path.insert(0, str(Path(__file__).parent))
from commit_store import BENCHMARK, corral_store, payload  # noqa: E402
from throughput import CountingEnvironment, OneStepAgent  # noqa: E402

from corral._json import dumps  # noqa: E402


def fresh_database(server: str) -> str:
    name = f"corral_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return name


def drop_database(server: str, name: str) -> None:
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def raw_psycopg(dsn: str, appenders: int, commits: int) -> dict[str, Any]:
    insert = (
        "INSERT INTO corral.commits (benchmark_id, task_id, trial, seq, kind, payload, "
        "created_at, input_tokens, output_tokens, cost, append_id) "
        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
    )
    order = [(trial, seq) for seq in range(commits) for trial in range(appenders)]
    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM corral.commits")
        conn.commit()
        start = time.perf_counter()
        for i in range(0, len(order), appenders):
            rows = [
                (
                    BENCHMARK,
                    f"task{t}",
                    0,
                    s,
                    "action",
                    dumps(payload(t, s)),
                    time.time(),
                    0,
                    0,
                    0.0,
                    uuid.uuid4(),
                )
                for t, s in order[i : i + appenders]
            ]
            with conn.cursor() as cur:
                cur.executemany(insert, rows)
            conn.commit()
        wall = time.perf_counter() - start
    return {"commits": len(order), "wall_s": wall, "commits_per_s": len(order) / wall}


async def trials_per_s(store: corral.CommitStore, trials: int) -> float:
    tasks = {
        f"t{i}": corral.BenchmarkTaskMetadata("agent", "env", model="m") for i in range(trials)
    }
    runner = corral.CorralRunner(
        tasks, {"agent": OneStepAgent()}, {"env": CountingEnvironment()}, store=store
    )
    start = time.perf_counter()
    report = await runner.run("throughput", trials_per_task=1, max_parallel=64)
    assert sum(report.counts.values()) == trials
    return trials / (time.perf_counter() - start)


def main(args: argparse.Namespace) -> None:
    name = fresh_database(args.server)
    dsn = f"{args.server}/{name}"
    try:
        ours = anyio.run(_appenders, dsn, args.appenders, args.commits)
        raw = raw_psycopg(dsn, args.appenders, args.commits)
    finally:
        drop_database(args.server, name)
    print(
        f"appenders={args.appenders} commits={ours['commits']} "
        f"PostgresStore={ours['commits_per_s']:,.0f}/s "
        f"raw_executemany={raw['commits_per_s']:,.0f}/s "
        f"ratio={ours['commits_per_s'] / raw['commits_per_s']:.0%} "
        f"p50={ours['latency_p50_ms']:.2f}ms p99={ours['latency_p99_ms']:.2f}ms"
    )
    name = fresh_database(args.server)
    try:
        pg = anyio.run(trials_per_s, corral.PostgresStore(f"{args.server}/{name}"), args.trials)
    finally:
        drop_database(args.server, name)
    with tempfile.TemporaryDirectory() as tmp:
        lite = anyio.run(trials_per_s, corral.SQLiteStore(Path(tmp) / "s.db"), args.trials)
    print(f"trials={args.trials} postgres={pg:,.0f} trials/s sqlite={lite:,.0f} trials/s")


async def _appenders(dsn: str, appenders: int, commits: int) -> dict[str, Any]:
    return await corral_store(Path(), appenders, commits, corral.PostgresStore(dsn))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--appenders", type=int, default=64)
    parser.add_argument("--commits", type=int, default=200)
    parser.add_argument("--trials", type=int, default=10_000)
    main(parser.parse_args())
