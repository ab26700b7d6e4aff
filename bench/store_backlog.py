"""Memory while the store lags: instant trials at a small max_parallel on SQLite.

    python bench/store_backlog.py [--trials 100000 --parallel 8 --per-task 1 --backlog 0 -1]

Instant trials (the agent answers at once, the scorer too) produce commits faster
than one SQLite writer thread makes them durable; nobody waits for a terminal or
an evaluation commit. Without a bound the handed-over rows pile up in memory.
Each run is its own process; it prints trials/s and the peak RSS growth: over
the whole run (the report keeps one record per trial), when the first trial
started (planning and registering the configuration: per task, not per
commit) and when the last trial ended.
``--backlog 0`` turns the bound off (the behaviour before it existed); ``-1``
runs with the default bound.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio

import corral
from corral import BenchmarkTaskMetadata, Final
from corral.testing import FakeEnvironment, ScriptedAgent


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


def child(trials: int, parallel: int, backlog: int, per_task: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="corral-backlog-"))
    tasks = {f"t{i}": BenchmarkTaskMetadata("a", "e") for i in range(trials // per_task)}
    store = corral.SQLiteStore(tmp / "store.db")
    bound = {} if backlog < 0 else {"max_backlog": backlog}
    runner = corral.CorralRunner(
        tasks,
        {"a": ScriptedAgent(lambda s: Final(1))},
        {"e": FakeEnvironment()},
        store=store,
        **bound,
    )
    peaks = Peak()
    before = rss_mb()
    start = time.perf_counter()
    anyio.run(
        lambda: runner.run(
            "b",
            trials_per_task=per_task,
            max_parallel=parallel,
            max_parallel_per_task=min(per_task, 4),
            observers=[peaks],
        )
    )
    wall = time.perf_counter() - start
    return {
        "trials": trials,
        "trials_per_s": trials / wall,
        "rss_growth_mb": rss_mb() - before,
        "rss_at_run_end_mb": peaks.rss_at_end - before,
        "rss_at_run_start_mb": peaks.rss_at_start - before,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=100_000)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--per-task", type=int, default=1, help="trials per task")
    parser.add_argument("--backlog", type=int, nargs="*", default=[0, -1])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.trials, args.parallel, args.backlog[0], args.per_task)))
        return
    for backlog in args.backlog:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                "--trials",
                str(args.trials),
                "--parallel",
                str(args.parallel),
                "--backlog",
                str(backlog),
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        result = json.loads(out)
        label = "unbounded" if backlog == 0 else f"bound {'default' if backlog < 0 else backlog}"
        print(
            f"{label:>14}: {result['trials']:,} trials, {result['trials_per_s']:,.0f} trials/s, "
            f"peak RSS growth {result['rss_growth_mb']:.0f} MB "
            f"({result['rss_at_run_start_mb']:.0f} MB when the first trial started, "
            f"{result['rss_at_run_end_mb']:.0f} MB when the last one ended)"
        )


if __name__ == "__main__":
    main()
