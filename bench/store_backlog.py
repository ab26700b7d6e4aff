"""Memory and live tasks while the store lags: instant trials on SQLite, PostgreSQL or memory.

    python bench/store_backlog.py [--trials 100000 --parallel 8 64 512
        --store sqlite postgres memory --per-task 1 --backlog 0 -1
        --tree OLD/src --tree NEW/src --rounds 2]

Instant trials (the agent answers at once, the scorer too) produce commits faster
than one store writer makes them durable; nobody waits for a terminal or an
evaluation commit. Without a bound the handed-over rows pile up in memory.
Each run is its own process; it prints trials/s, the peak RSS growth (over the
whole run, when the first trial started and when the last one ended) and the
peak of live asyncio tasks in the process (counted exactly, at every task's
creation and end, by a task factory) against the bound the README states,
``max_parallel_total + 16`` (``max_parallel_total`` is ``2P`` here).
``--backlog 0`` turns the bound off (the behaviour before it existed); ``-1``
runs with the default bound. ``--tree`` runs the same cells against another
checkout's ``src`` (alternating trees within each round, so a loaded machine
weighs on both alike); without it, the ``corral`` on the path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import anyio

import corral
from corral import BenchmarkTaskMetadata, Final
from corral.testing import FakeEnvironment, ScriptedAgent

PG_SERVER = "postgresql://postgres@127.0.0.1:5432"


def cpu_s() -> float:
    """CPU time of the whole process (every thread: the store's writer too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class Peak:
    """Peak RSS when the last trial has ended, before the report is built."""

    rss_at_end = rss_at_start = 0.0

    def on_run_start(self, info: corral.RunInfo) -> None:
        self.rss_at_start = rss_mb()

    def on_run_end(self, info: corral.RunInfo) -> None:
        self.rss_at_end = rss_mb()

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        pass


class TaskGauge:
    """Live asyncio tasks, counted at each creation and end (a task factory): exact at
    every instant, and costing nothing per trial (workers are reused)."""

    def __init__(self) -> None:
        self.live = self.peak = 0

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        self.live = self.peak = len(asyncio.all_tasks())

        def factory(
            loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kw: Any
        ) -> asyncio.Task[Any]:
            task = asyncio.Task(coro, loop=loop, **kw)
            self.live += 1
            self.peak = max(self.peak, self.live)
            task.add_done_callback(self._ended)
            return task

        loop.set_task_factory(factory)  # type: ignore[arg-type]

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self.live -= 1


def open_store(kind: str, tmp: Path) -> tuple[Any, str | None]:
    """The store, and the PostgreSQL database to drop afterwards."""
    if kind == "memory":
        return corral.MemoryStore(), None
    if kind == "sqlite":
        return corral.SQLiteStore(tmp / "store.db"), None
    import psycopg

    name = f"corral_backlog_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return corral.PostgresStore(f"{PG_SERVER}/{name}"), name


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def child(trials: int, parallel: int, backlog: int, per_task: int, kind: str) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="corral-backlog-"))
    tasks = {f"t{i}": BenchmarkTaskMetadata("a", "e") for i in range(trials // per_task)}
    store, database = open_store(kind, tmp)
    bound = {} if backlog < 0 else {"max_backlog": backlog}
    runner = corral.CorralRunner(
        tasks,
        {"a": ScriptedAgent(lambda s: Final(1))},
        {"e": FakeEnvironment()},
        store=store,
        **bound,
    )
    peaks = Peak()
    gauge = TaskGauge()

    async def run() -> corral.BenchmarkReport:
        gauge.install()
        return await runner.run(
            "b",
            trials_per_task=per_task,
            max_parallel=parallel,
            max_parallel_per_task=min(per_task, 4),
            observers=[peaks],
        )

    before = rss_mb()
    start, cpu = time.perf_counter(), cpu_s()
    try:
        report = anyio.run(run)
    finally:
        if database is not None:
            drop_database(database)
    wall, cpu = time.perf_counter() - start, cpu_s() - cpu
    assert report.counts["completed"] == trials, report.counts
    return {
        "trials": trials,
        "trials_per_s": trials / wall,
        "cpu_us_per_trial": cpu / trials * 1e6,
        "rss_growth_mb": rss_mb() - before,
        "rss_at_run_end_mb": peaks.rss_at_end - before,
        "rss_at_run_start_mb": peaks.rss_at_start - before,
        "peak_live_tasks": gauge.peak,
        "bound": 2 * parallel + 16,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--parallel", type=int, nargs="+", default=[8])
    parser.add_argument("--per-task", type=int, default=1, help="trials per task")
    parser.add_argument("--backlog", type=int, nargs="+", default=[0, -1])
    parser.add_argument(
        "--store", nargs="+", default=["sqlite"], choices=["sqlite", "postgres", "memory"]
    )
    parser.add_argument("--tree", action="append", default=[], help="a checkout's src dir")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        cell = (args.trials, args.parallel[0], args.backlog[0], args.per_task, args.store[0])
        print(json.dumps(child(*cell)))
        return
    trees: list[str | None] = list(args.tree) or [None]
    for round_no in range(args.rounds):
        for kind in args.store:
            for parallel in args.parallel:
                for backlog in args.backlog:
                    for tree in trees:
                        measure(args, round_no, kind, parallel, backlog, tree)


def measure(
    args: argparse.Namespace,
    round_no: int,
    kind: str,
    parallel: int,
    backlog: int,
    tree: str | None,
) -> None:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([tree, str(Path(tree).parent)])
    command = [sys.executable, __file__, "--child", "--trials", str(args.trials)]
    command += ["--parallel", str(parallel), "--backlog", str(backlog)]
    command += ["--per-task", str(args.per_task), "--store", kind]
    out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
    result = json.loads(out)
    label = "unbounded" if backlog == 0 else f"bound {'default' if backlog < 0 else backlog}"
    print(
        f"round {round_no} {tree or 'corral'} {kind} P={parallel} {label}: "
        f"{result['trials']:,} trials, {result['trials_per_s']:,.0f} trials/s, "
        f"{result['cpu_us_per_trial']:,.0f} us CPU/trial, "
        f"peak live tasks {result['peak_live_tasks']} (bound {result['bound']}), "
        f"peak RSS growth {result['rss_growth_mb']:.0f} MB "
        f"({result['rss_at_run_start_mb']:.0f} MB when the first trial started, "
        f"{result['rss_at_run_end_mb']:.0f} MB when the last one ended)",
        flush=True,
    )


if __name__ == "__main__":
    main()
