"""Makespan on a DAG workload: critical-path order vs plain FIFO, against the lower bound.

    python bench/dag_makespan.py [--tasks 240 --max-parallel 8 --trials 2 --seed 1]

The whole runner runs on trio with a `MockClock`, so every agent's duration is
virtual time: the makespan is exact and the script takes seconds. The lower
bound is max(longest chain of durations, total work / max_parallel).
"""

from __future__ import annotations

import argparse
import json
import random
from typing import Any

import anyio
import trio
import trio.testing

import corral
from corral import BenchmarkTaskMetadata, Final
from corral.testing import FakeEnvironment


def workload(tasks: int, seed: int) -> tuple[dict[str, BenchmarkTaskMetadata], dict[str, float]]:
    rng = random.Random(seed)
    metas: dict[str, BenchmarkTaskMetadata] = {}
    durations: dict[str, float] = {}
    names: list[str] = []
    for i in range(tasks):
        name = f"t{i:03d}"
        # A few long chains through many short independent tasks: FIFO starts the
        # independent ones first and leaves the chains for the end.
        parents: tuple[str, ...] = ()
        if names and rng.random() < 0.35:
            parents = tuple(
                sorted(set(rng.sample(names[-12:], k=min(len(names[-12:]), rng.randint(1, 2)))))
            )
        metas[name] = BenchmarkTaskMetadata("agent", "env", dependencies=parents)
        durations[name] = rng.choice([1, 1, 2, 3, 5, 8, 13])
        names.append(name)
    return metas, durations


def lower_bound(
    metas: dict[str, BenchmarkTaskMetadata],
    durations: dict[str, float],
    max_parallel: int,
    trials: int,
    per_task: int,
) -> float:
    finish: dict[str, float] = {}
    for name, meta in metas.items():  # insertion order is topological here
        finish[name] = durations[name] + max((finish[p] for p in meta.dependencies), default=0)
    # With one trial of a task at a time, its rounds run in sequence.
    chain = max(finish.values()) * (trials if per_task == 1 else 1)
    return max(chain, sum(durations.values()) * trials / max_parallel)


class Sleeper:
    def __init__(self, durations: dict[str, float]) -> None:
        self.durations = durations

    async def act(self, session: corral.AgentSession) -> Final:
        await anyio.sleep(self.durations[session.task_id])
        return Final(session.task_id)


async def makespan(
    metas: dict[str, BenchmarkTaskMetadata],
    durations: dict[str, float],
    args: argparse.Namespace,
    parallel: int,
    critical_path: bool,
) -> float:
    runner = corral.CorralRunner(
        metas, {"agent": Sleeper(durations)}, {"env": FakeEnvironment()}, store=corral.MemoryStore()
    )
    start = trio.current_time()
    await runner.run(
        "dag",
        trials_per_task=args.trials,
        max_parallel=parallel,
        max_parallel_per_task=args.per_task,
        order="critical_path" if critical_path else "fifo",
    )
    return trio.current_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=240)
    parser.add_argument("--max-parallel", type=int, nargs="+", default=[8, 16, 24, 32])
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--per-task", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    metas, durations = workload(args.tasks, args.seed)
    rows = []
    print(f"{args.tasks} tasks, {args.trials} trial(s) each, seed {args.seed}")
    print(f"{'P':>4} {'bound':>8} {'critical path':>14} {'ratio':>6} {'fifo':>8} {'ratio':>6}")
    for parallel in args.max_parallel:
        bound = lower_bound(metas, durations, parallel, args.trials, args.per_task)
        row: dict[str, Any] = {"max_parallel": parallel, "lower_bound": bound}
        for label, cp in (("critical_path", True), ("fifo", False)):
            clock = trio.testing.MockClock(autojump_threshold=0)
            span = anyio.run(
                makespan,
                metas,
                durations,
                args,
                parallel,
                cp,
                backend="trio",
                backend_options={"clock": clock},
            )
            row[label] = span
        rows.append(row)
        print(
            f"{parallel:>4} {bound:>8.1f} {row['critical_path']:>14.1f} "
            f"{row['critical_path'] / bound:>6.3f} {row['fifo']:>8.1f} {row['fifo'] / bound:>6.3f}"
        )
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
