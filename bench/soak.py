"""Soak: a 2,000-trial run killed with SIGKILL at random points, then checked.

    python bench/soak.py [--tasks 1000 --trials 2 --kills 20 --seed 7]
    python bench/soak.py --store postgresql://postgres@127.0.0.1/DB   # on PostgreSQL

A child process runs the benchmark on a SQLite store (or on the PostgreSQL
database given, which must be empty of this benchmark: a fresh database is
best); an observer appends every acknowledged commit to a file (flushed per
line, so the kernel has it before any kill). The parent kills the child at
random moments, and after each kill checks that every acknowledged commit is in
the store (and, on SQLite, that ``PRAGMA integrity_check`` is ok). A last run
finishes the benchmark; its report must equal that of an uninterrupted
reference run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio
from durable_bench import Log, comparable, runner  # bench/, beside this file

import corral
from corral.store.postgres import is_postgres_dsn

ROOT = Path(__file__).resolve().parents[1]

BENCHMARK = "soak"


class AckFile:
    def __init__(self, path: Path) -> None:
        self.file = open(path, "a", buffering=1)  # line-buffered: one write(2) per commit

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        self.file.write(f"{key.task_id}\t{key.trial}\t{commit.seq}\t{commit.kind}\n")


async def child(store: str, log: Path, acks: Path, tasks: int, trials: int, parallel: int) -> None:
    await runner(store, Log(log), tasks).run(
        BENCHMARK,
        trials_per_task=trials,
        k_values=(1, 2),
        max_parallel=parallel,
        observers=[AckFile(acks)],
    )


def stored_commits(db: str) -> set[tuple[str, int, int, str]]:
    if is_postgres_dsn(db):
        import psycopg

        with psycopg.connect(db) as pg:
            rows = pg.execute(
                "SELECT task_id, trial, seq, kind FROM corral.commits WHERE benchmark_id = %s",
                (BENCHMARK,),
            )
            return set(rows)
    conn = sqlite3.connect(db)
    try:
        ok = conn.execute("PRAGMA integrity_check").fetchone()[0]
        if ok != "ok":
            raise SystemExit(f"integrity_check failed: {ok}")
        return set(conn.execute("SELECT task_id, trial, seq, kind FROM commits"))
    finally:
        conn.close()


def read_acks(path: Path) -> list[tuple[str, int, int, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split("\t")
        if len(parts) == 4:  # a line cut by the kill was never acknowledged whole
            out.append((parts[0], int(parts[1]), int(parts[2]), parts[3]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--store", help="a PostgreSQL DSN (default: a new SQLite file)")
    parser.add_argument("--child", nargs=3, metavar=("STORE", "LOG", "ACKS"))
    args = parser.parse_args()
    if args.child:
        anyio.run(
            child,
            args.child[0],
            Path(args.child[1]),
            Path(args.child[2]),
            args.tasks,
            args.trials,
            args.parallel,
        )
        return

    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="corral-soak-"))
    store = args.store or str(tmp / "store.db")
    log, acks = tmp / "log.jsonl", tmp / "acks.tsv"
    command = [
        sys.executable,
        __file__,
        "--tasks",
        str(args.tasks),
        "--trials",
        str(args.trials),
        "--parallel",
        str(args.parallel),
        "--child",
        store,
        str(log),
        str(acks),
    ]
    kills = 0
    recovery_wall = 0.0
    checked = 0
    started = time.perf_counter()
    checks = "" if is_postgres_dsn(store) else ", integrity ok"
    while kills < args.kills:
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, cwd=ROOT)
        # Kill after a random number of new acknowledgements (polled), so every
        # kill lands while trials are running, at a random commit point.
        before = len(read_acks(acks))
        target = before + rng.randint(20, 900)
        finished = False
        while len(read_acks(acks)) < target:
            if proc.poll() is not None:
                finished = True
                break
            time.sleep(0.005)  # polling another process's progress, not synchronising ours
        if not finished:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        delay = time.perf_counter() - t0
        recovery_wall += time.perf_counter() - t0
        acked = read_acks(acks)
        stored = stored_commits(store)
        lost = [a for a in acked if a not in stored]
        checked = len(acked)
        if lost:
            raise SystemExit(f"LOST {len(lost)} acknowledged commits, e.g. {lost[:3]}")
        if finished:
            print(f"the run finished before kill {kills + 1}; use more tasks for more kills")
            break
        kills += 1
        print(
            f"kill {kills:2d} after {delay:.2f}s: {len(acked):6d} acknowledged, "
            f"{len(stored):6d} stored, 0 lost{checks}",
            flush=True,
        )

    t0 = time.perf_counter()
    final = anyio.run(
        lambda: runner(store, Log(log), args.tasks).run(
            BENCHMARK, trials_per_task=args.trials, k_values=(1, 2), max_parallel=args.parallel
        )
    )
    recovery_wall += time.perf_counter() - t0
    reference = anyio.run(
        lambda: runner(corral.MemoryStore(), Log(None), args.tasks).run(
            BENCHMARK, trials_per_task=args.trials, k_values=(1, 2), max_parallel=args.parallel
        )
    )
    stored = stored_commits(store)
    acked = read_acks(acks)
    lost = [a for a in acked if a not in stored]
    executions = Counter(e["key"] for e in Log(log).read() if e["kind"] == "execute")
    repeated = sum(n - 1 for n in executions.values())
    same = comparable(final) == comparable(reference)
    print(
        json.dumps(
            {
                "store": "postgresql" if is_postgres_dsn(store) else "sqlite",
                "trials": args.tasks * args.trials,
                "kills_survived": kills,
                "acknowledged_commits_checked": len(acked),
                "commits_lost": len(lost),
                "commits_stored": len(stored),
                "executions": sum(executions.values()),
                "repeated_executions": repeated,
                "report_equals_reference": same,
                "recovery_runs_wall_s": round(recovery_wall, 2),
                "total_wall_s": round(time.perf_counter() - started, 2),
                "checked_after_each_kill": checked > 0,
            },
            indent=2,
        )
    )
    if lost or not same:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
