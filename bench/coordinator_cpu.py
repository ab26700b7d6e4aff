"""Where the coordinator's CPU goes with the Ray executor: one cell, per thread.

    PYTHONPATH=src python bench/coordinator_cpu.py [--trials 8000] [--latency 0.01]
        [--parallel 64] [--hosts 1] [--store sqlite|postgres] [--repeat 2] [--observer]

Runs the cell of bench/ray_executor.py ``--repeat`` times on one local Ray and
prints, per run, the coordinator's CPU per trial (time.process_time, as
ray_executor.py), the part of it spent while trials are dispatched (without
set-up and report: what bounds one coordinator's trials/s) and its split by
thread (/proc/self/task): the run loop's
thread, Ray's driver threads (worker.io: gRPC; the others) and "ended" for
threads gone by the end (anyio's worker threads); and the CPU the rest of the
machine spent meanwhile (/proc/stat less this process: the hosts, Ray's GCS and
raylet, the PostgreSQL server if used, anything else running): with SQLite on a
quiet machine, what the hosts cost per trial, Ray's daemons included.
The first run includes warm-up (actor class export, imports).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from ray_executor import cell, init_ray, store_for

import corral
from corral.executor._dispatch import RayExecution


def thread_cpu() -> dict[tuple[str, str], int]:
    """Clock ticks of CPU (user + system) by (thread id, thread name)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = Path(f"/proc/self/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[(tid, name)] = int(fields[11]) + int(fields[12])
    return out


def busy_ticks() -> tuple[int, int]:
    """(busy, all) clock ticks of the whole machine so far (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def by_thread(
    before: dict[tuple[str, str], int], after: dict[tuple[str, str], int], cpu: float, trials: int
) -> str:
    """Microseconds of CPU per trial by thread between two `thread_cpu` readings (the
    run loop's thread by that name; "ended": threads gone by ``after``, out of ``cpu``)."""
    tick = os.sysconf("SC_CLK_TCK")
    main_thread = str(os.getpid())
    split: dict[str, float] = {}
    for (tid, name), ticks in after.items():
        label = "run loop" if tid == main_thread else name
        split[label] = split.get(label, 0) + (ticks - before.get((tid, name), 0))
    split["ended"] = cpu * tick - sum(split.values())
    return ", ".join(
        f"{label} {ticks / tick / trials * 1e6:.0f}"
        for label, ticks in sorted(split.items(), key=lambda kv: -kv[1])
        if ticks > 0
    )


class DispatchClock:
    """The process's CPU while the Ray executor dispatches (from the hosts' creation to
    the last result: `RayExecution._run`, wrapped), i.e. without the run's set-up and its
    report: the part that bounds how many trials/s one coordinator can drive."""

    def __init__(self) -> None:
        self.reset()
        inner = RayExecution._run

        async def run(remote: RayExecution) -> None:
            started, wall = time.process_time(), time.perf_counter()
            try:
                await inner(remote)
            finally:
                self.cpu += time.process_time() - started
                self.wall += time.perf_counter() - wall

        RayExecution._run = run  # type: ignore[method-assign]

    def reset(self) -> None:
        """Start counting again (for the next run)."""
        self.cpu = 0.0
        self.wall = 0.0


def main(args: argparse.Namespace) -> None:
    tick = os.sysconf("SC_CLK_TCK")
    init_ray()
    dispatch = DispatchClock()
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.repeat):
            executor = corral.RayExecutor(hosts=args.hosts, host_options={"num_cpus": 0})
            store, databases = store_for(args.store, Path(tmp), n)
            dispatch.reset()
            before, cpu, machine = thread_cpu(), time.process_time(), busy_ticks()
            row = anyio.run(
                cell, executor, args.trials, args.latency, args.parallel, store, args.observer
            )
            cpu, after = time.process_time() - cpu, thread_cpu()
            busy = busy_ticks()[0] - machine[0]
            if databases is not None:
                databases.close()
            shares = by_thread(before, after, cpu, args.trials)
            print(
                f"L={args.latency * 1e3:g}ms P={args.parallel} hosts={args.hosts} "
                f"cpu_us/trial={cpu / args.trials * 1e6:.0f} "
                f"dispatch_us/trial={dispatch.cpu / args.trials * 1e6:.0f} ({shares}) "
                f"trials/s={row['trials_per_s']:,.0f} "
                f"rest_of_machine_us/trial={(busy / tick - cpu) / args.trials * 1e6:.0f}",
                flush=True,
            )


def cell_arguments(doc: str | None, trials: int, latency: float, parallel: int) -> Any:
    """The command line of a one-cell benchmark, with these defaults."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--trials", type=int, default=trials)
    parser.add_argument("--latency", type=float, default=latency, help="Seconds a trial takes.")
    parser.add_argument("--parallel", type=int, default=parallel)
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=2)
    return parser


if __name__ == "__main__":
    parser = cell_arguments(__doc__, 8_000, 0.010, 64)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument(
        "--observer",
        action="store_true",
        help="Run with an observer (as the CLI's live display): hosts send every commit back.",
    )
    main(parser.parse_args())
