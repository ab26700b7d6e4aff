"""Makespan over its lower bound on the mixed-limit workload, Corral vs the naive runner.

Both runners run on trio with a `MockClock`, so durations are virtual time:
each makespan is exact and deterministic, and a run takes a second or two.
Corral uses its in-memory store here (this measures admission, not the store).
The naive runner is measured with its trials created task by task (``naive``,
the loop ``for task: for trial:``) and round by round (``naive_rounds``).

    python bench/scheduling.py [--seeds 1 2 3 4 5 --tasks 120]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import trio
import trio.testing
from naive import NaiveLimits, run_naive
from workloads import CountingEnvironment, DurationAgent, MixedWorkload, lower_bound, mixed_workload

import corral


async def _corral(w: MixedWorkload) -> float:
    runner = corral.CorralRunner(
        w.tasks,
        {"agent": DurationAgent(w.durations)},
        {"fast-env": CountingEnvironment(), "slow-env": CountingEnvironment()},
        store=corral.MemoryStore(),
    )
    start = trio.current_time()
    report = await runner.run(
        "mixed",
        trials_per_task=w.trials_per_task,
        max_parallel=w.max_parallel,
        max_parallel_per_task=w.max_parallel_per_task,
        max_parallel_by_model=w.by_model,
        max_parallel_by_environment=w.by_environment,
    )
    assert sum(report.counts.values()) == len(w.durations), report.counts
    return trio.current_time() - start


async def _naive(w: MixedWorkload, order: str) -> float:
    start = trio.current_time()
    records = await run_naive(
        w.tasks,
        {"agent": DurationAgent(w.durations)},
        {"fast-env": CountingEnvironment(), "slow-env": CountingEnvironment()},
        trials_per_task=w.trials_per_task,
        order=order,
        limits=NaiveLimits(
            w.max_parallel,
            w.max_parallel_per_task,
            max_parallel_by_model=w.by_model,
            max_parallel_by_environment=w.by_environment,
        ),
    )
    assert len(records) == len(w.durations)
    return trio.current_time() - start


def measure(seed: int, tasks: int) -> dict[str, Any]:
    w = mixed_workload(seed, tasks)
    bound = lower_bound(w)
    row: dict[str, Any] = {
        "seed": seed,
        "tasks": tasks,
        "trials": len(w.durations),
        "lower_bound": bound,
    }
    runs: list[tuple[str, Callable[..., Awaitable[float]], tuple[Any, ...]]] = [
        ("corral", _corral, ()),
        ("naive", _naive, ("tasks",)),
        ("naive_rounds", _naive, ("rounds",)),
    ]
    for name, fn, extra in runs:
        clock = trio.testing.MockClock(autojump_threshold=0)
        span = anyio.run(fn, w, *extra, backend="trio", backend_options={"clock": clock})
        row[name] = span
        row[f"{name}_ratio"] = span / bound
    return row


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--tasks", type=int, default=120)
    args = parser.parse_args()
    for seed in args.seeds:
        print(json.dumps(measure(seed, args.tasks)))
