"""Where Corral's time goes on the throughput workload (cProfile or pyinstrument).

    python bench/profile_corral.py [--store sqlite|memory] [--tasks 2500] [--per-task 4]
        [--latency 0] [--parallel 64] [--top 30] [--pyinstrument]

cProfile (the default) prints the functions with the most own time, and the
cost per trial of each, and the Python calls per trial (a count machine load
cannot move); ``--pyinstrument`` prints pyinstrument's call tree
instead (``pip install pyinstrument``). Both profile only the run call.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
from pathlib import Path

import anyio
from workloads import TRIALS_PER_TASK, CountingEnvironment, SleepThenStepAgent, throughput_tasks

import corral


def make_runner(store: str, tasks: int, latency: float, tmp: Path) -> corral.CorralRunner:
    backend: corral.CommitStore = (
        corral.SQLiteStore(tmp / "store.db") if store == "sqlite" else corral.MemoryStore()
    )
    return corral.CorralRunner(
        throughput_tasks(tasks),
        {"agent": SleepThenStepAgent(latency)},
        {"env": CountingEnvironment()},
        store=backend,
    )


async def run(runner: corral.CorralRunner, parallel: int, per_task: int) -> None:
    await runner.run(
        "profile",
        trials_per_task=per_task,
        max_parallel=parallel,
        max_parallel_per_task=per_task,
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--tasks", type=int, default=2_500)
    parser.add_argument("--per-task", type=int, default=TRIALS_PER_TASK, help="trials per task")
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--parallel", type=int, default=64)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--pyinstrument", action="store_true")
    args = parser.parse_args()
    trials = args.tasks * args.per_task
    with tempfile.TemporaryDirectory() as tmp:
        runner = make_runner(args.store, args.tasks, args.latency, Path(tmp))
        if args.pyinstrument:
            from pyinstrument import Profiler

            profiler = Profiler(interval=0.0005)
            profiler.start()
            anyio.run(run, runner, args.parallel, args.per_task)
            profiler.stop()
            print(profiler.output_text(unicode=True, color=False, show_all=False))
            return
        prof = cProfile.Profile()
        prof.enable()
        anyio.run(run, runner, args.parallel, args.per_task)
        prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    total = stats.total_tt  # type: ignore[attr-defined]
    print(
        f"{trials:,} trials, store={args.store}, L={args.latency}, P={args.parallel}: "
        f"{total:.2f} s profiled, {total / trials * 1e6:.0f} us per trial (with cProfile's "
        "own overhead)"
    )
    print(f"Python calls per trial: {stats.total_calls / trials:.1f}")  # type: ignore[attr-defined]
    print("Own time by layer, us per trial:")
    for layer, seconds in by_layer(stats):
        print(f"  {layer:32} {seconds / trials * 1e6:8.1f}  {100 * seconds / total:5.1f}%")
    print()
    stats.sort_stats("tottime").print_stats(args.top)
    print(out.getvalue())


#: (substring of a profiled file name, layer), first match wins.
LAYERS = (
    ("corral/runtime", "corral.runtime (trial, session)"),
    ("corral/store", "corral.store"),
    ("corral/scheduler", "corral.scheduler (admission, loop)"),
    ("corral/report", "corral.report"),
    ("corral/", "corral (other)"),
    ("anyio/", "anyio"),
    ("asyncio/", "asyncio (event loop)"),
    ("json/", "json (encode/decode)"),
    ("bench/", "the workload's agent and environment"),
)


def by_layer(stats: pstats.Stats) -> list[tuple[str, float]]:
    """Own time summed by layer; C functions count under ``builtins``, and the
    event loop's ``epoll`` wait (idle: waiting for the writer thread) separately."""
    totals: dict[str, float] = {}
    for (filename, _, name), row in stats.stats.items():  # type: ignore[attr-defined]
        own = row[2]
        if "epoll" in name:
            layer = "idle (epoll wait)"
        elif filename == "~":
            layer = "builtins (C calls)"
        else:
            layer = next((label for part, label in LAYERS if part in filename), "other")
        totals[layer] = totals.get(layer, 0.0) + own
    return sorted(totals.items(), key=lambda item: -item[1])


if __name__ == "__main__":
    main()
