"""What keeping trial heads costs per commit: the throughput workload with heads kept
and with their upkeep patched out, alternating in one run (issue 26).

    python bench/heads_cost.py [--rounds 5] [--trials 4000] [--per-task 4]
        [--max-parallel 64] [--store sqlite|postgres]
        [--server postgresql://postgres@127.0.0.1:5432]

Each measurement is a fresh process (so neither variant inherits the other's heap),
``kept`` and ``patched`` taking turns. ``patched`` turns the writer's head upkeep
(`SQLiteStore._put_heads`, `PgWriter._known_heads`) into a no-op in that process
only: the commits are written as before, no head is folded or written. The run is
timed up to its last commit (its report, built from the heads after it, is left
out: without heads it reads none). Printed per round and as medians: CPU
microseconds per trial (the process's user + system time over the run), the
writer's own CPU microseconds per trial (its thread's clock over its batches: the
figure least disturbed by other load) and trials per second.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import corral

sys.path.insert(0, str(Path(__file__).parent))
from postgres_store import drop_database, fresh_database  # noqa: E402
from throughput import CountingEnvironment, OneStepAgent  # noqa: E402

VARIANTS = ("kept", "patched")


class WriterClock:
    """CPU seconds the writer spends in its batches (its own thread's clock): the
    figure least disturbed by other load on the machine."""

    def __init__(self) -> None:
        from corral.store import _pg_writer, sqlite

        self.seconds = 0.0
        for owner, name in ((sqlite.SQLiteStore, "_write_batch"), (_pg_writer.PgWriter, "write")):
            setattr(owner, name, self.timed(getattr(owner, name)))

    def timed(self, write: Any) -> Any:
        def timed(*args: Any) -> Any:
            start = time.thread_time()
            try:
                return write(*args)
            finally:
                self.seconds += time.thread_time() - start

        return timed


def patch_out_heads() -> None:
    """Head upkeep off: the writers write commits only (this process, for measuring)."""
    from corral.store import _pg_writer, sqlite

    sqlite.SQLiteStore._put_heads = lambda self, conn, requests: None  # type: ignore[method-assign]
    _pg_writer.PgWriter._known_heads = lambda self, batch: ([], {})  # type: ignore[method-assign]


class LastCommit:
    """The process's CPU and wall clocks at the latest commit heard of: the run up to
    its last trial's last commit, without the report built from the heads after it
    (which a run without heads would build from nothing)."""

    def __init__(self) -> None:
        self.cpu = self.wall = 0.0

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        self.cpu, self.wall = time.process_time(), time.perf_counter()


async def measure(
    args: argparse.Namespace, store: Any, clock: WriterClock | None = None
) -> dict[str, float]:
    tasks = {
        f"t{i}": corral.BenchmarkTaskMetadata("agent", "env", model="m")
        for i in range(args.trials // args.per_task)
    }
    runner = corral.CorralRunner(
        tasks, {"agent": OneStepAgent()}, {"env": CountingEnvironment()}, store=store
    )
    last = LastCommit()
    start, cpu = time.perf_counter(), time.process_time()
    report = await runner.run(
        "heads_cost",
        trials_per_task=args.per_task,
        max_parallel=args.max_parallel,
        max_parallel_per_task=args.per_task,
        observers=[last],
    )
    wall, cpu = last.wall - start, last.cpu - cpu
    trials = sum(report.counts.values())
    assert trials == args.trials, report.counts
    writer = clock.seconds / trials * 1e6 if clock is not None else 0.0
    return {"cpu_us": cpu / trials * 1e6, "writer_us": writer, "trials_s": trials / wall}


def one(args: argparse.Namespace) -> None:
    if args.one == "patched":
        patch_out_heads()
    clock = WriterClock()
    if args.store == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            store = corral.SQLiteStore(Path(tmp) / "store.db")
            found = anyio.run(measure, args, store, clock)
    else:
        name = fresh_database(args.server)
        try:
            store = corral.PostgresStore(f"{args.server}/{name}")
            found = anyio.run(measure, args, store, clock)
        finally:
            drop_database(args.server, name)
    print(json.dumps(found))


def main(args: argparse.Namespace) -> None:
    found: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    passed = [
        f"--{k.replace('_', '-')}={v}"
        for k, v in vars(args).items()
        if k in ("trials", "per_task", "max_parallel", "store", "server")
    ]
    for n in range(args.rounds):
        for variant in VARIANTS if n % 2 == 0 else VARIANTS[::-1]:
            out = subprocess.run(
                [sys.executable, __file__, f"--one={variant}", *passed],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            got = json.loads(out.splitlines()[-1])
            found[variant].append(got)
            print(
                f"round {n + 1} {variant:8} cpu_us/trial={got['cpu_us']:.0f} "
                f"writer_us/trial={got['writer_us']:.1f} "
                f"trials/s={got['trials_s']:,.0f}",
                flush=True,
            )
    figures = ("cpu_us", "writer_us", "trials_s")
    medians = {v: {m: statistics.median(r[m] for r in found[v]) for m in figures} for v in VARIANTS}
    kept, patched = medians["kept"], medians["patched"]
    print(
        f"store={args.store} trials={args.trials} per_task={args.per_task} "
        f"P={args.max_parallel} rounds={args.rounds} (medians)\n"
        f"  heads kept:    cpu_us/trial={kept['cpu_us']:.0f} "
        f"writer_us/trial={kept['writer_us']:.1f} trials/s={kept['trials_s']:,.0f}\n"
        f"  heads patched: cpu_us/trial={patched['cpu_us']:.0f} "
        f"writer_us/trial={patched['writer_us']:.1f} trials/s={patched['trials_s']:,.0f}\n"
        f"  heads cost: {kept['cpu_us'] - patched['cpu_us']:+.0f} us/trial "
        f"({kept['cpu_us'] / patched['cpu_us'] - 1:+.1%} CPU), writer "
        f"{kept['writer_us'] - patched['writer_us']:+.1f} us/trial, "
        f"{kept['trials_s'] / patched['trials_s'] - 1:+.1%} trials/s"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--per-task", type=int, default=4)
    parser.add_argument("--max-parallel", type=int, default=64)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    one(parsed) if parsed.one else main(parsed)
