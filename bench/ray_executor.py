"""The Ray executor against the in-process one on the throughput workload, in one run.

    PYTHONPATH=src python bench/ray_executor.py [--trials 40000] [--store sqlite|postgres]
        [--only NAME] [--marginal]

Cells: L = 10 ms, P = 64 and L = 100 ms, P = 512 (N tasks x 4 trials of an agent
that awaits sleep(L) and takes one tool step, as bench/run.py), each in process
and on 1 and 2 Ray hosts. Per cell: the coordinator's CPU per trial
(time.process_time of this process, Ray's driver threads included; with
``--marginal`` also the CPU of the extra 3/4 of the trials over a run of a quarter
of them, in which set-up, the hosts' start and Ray's warm-up cancel), trials/s and
wall / ideal (ideal = trials * L / P). Also Ray's start-up time and the memory
it adds (this process, and Ray's own processes: GCS, raylet, workers, hosts).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import workloads

import corral

HERE = Path(__file__).resolve().parent


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (Ray's GCS, raylet and workers when Ray was started here)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


SERVER = os.environ.get("CORRAL_TEST_PG", "postgresql://postgres@127.0.0.1:5432")


class _Dropped:
    """Drops the benchmark's database on close."""

    def __init__(self, name: str) -> None:
        self.name = name

    def close(self) -> None:
        from postgres_store import drop_database

        drop_database(SERVER, self.name)


def store_for(kind: str, tmp: Path, n: int) -> tuple[Any, Any]:
    if kind == "sqlite":
        return corral.SQLiteStore(tmp / f"store{n}.db"), None
    from postgres_store import fresh_database  # psycopg: imported only for this store

    name = fresh_database(SERVER)
    return corral.PostgresStore(f"{SERVER}/{name}"), _Dropped(name)


class CommitCounter:
    """An observer that counts commits (the cheapest one: what observers cost a run)."""

    def __init__(self) -> None:
        self.commits = 0

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        self.commits += 1


async def cell(
    executor: corral.RayExecutor | None,
    trials: int,
    latency: float,
    parallel: int,
    store: Any,
    observe: bool = False,
    stored: bool = True,
) -> dict[str, Any]:
    """One run's figures; ``stored=False``: its hosts write nothing to the store (load
    generators), so the report, read from the store, has every trial unfinished."""
    tasks = workloads.throughput_tasks(trials // workloads.TRIALS_PER_TASK)
    runner = corral.CorralRunner(
        tasks,
        {"agent": workloads.SleepThenStepAgent(latency)},
        {"env": workloads.CountingEnvironment()},
        store=store,
    )
    wall, cpu = time.perf_counter(), time.process_time()
    report = await runner.run(
        "bench",
        trials_per_task=workloads.TRIALS_PER_TASK,
        max_parallel=parallel,
        max_parallel_per_task=workloads.TRIALS_PER_TASK,
        executor=executor,
        observers=[CommitCounter()] if observe else (),
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    done = sum(report.counts.values())
    assert done == trials, report.counts
    assert report.pass_at_k[1] == 1.0 if stored else report.counts["unfinished"] == trials
    ideal = trials * latency / parallel
    return {
        "cpu_us_per_trial": cpu / trials * 1e6,
        "cpu_s": cpu,
        "trials_per_s": trials / wall,
        "wall_s": wall,
        "wall_over_ideal": wall / ideal,
    }


def init_ray() -> None:
    """A local Ray on every core, no dashboard, whose workers import corral and bench/."""
    import ray

    path = os.pathsep.join([str(HERE.parent / "src"), str(HERE)])
    ray.init(
        num_cpus=os.cpu_count(),
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )


def main(args: argparse.Namespace) -> None:
    before = rss_mb(os.getpid())
    start = time.perf_counter()
    init_ray()
    started = time.perf_counter() - start
    ray_rss = sum(rss_mb(pid) for pid in descendants(os.getpid()))
    print(
        f"ray start-up {started:.2f} s; RSS added: this process "
        f"{rss_mb(os.getpid()) - before:.0f} MB, Ray's processes {ray_rss:.0f} MB"
    )
    grid = [(0.010, 64), (0.100, 512)]
    runners: list[tuple[str, corral.RayExecutor | None]] = [
        ("in-process", None),
        ("ray 1 host", corral.RayExecutor(hosts=1, host_options={"num_cpus": 0})),
        ("ray 2 hosts", corral.RayExecutor(hosts=2, host_options={"num_cpus": 0})),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        n = 0
        for latency, parallel in grid:
            for name, executor in runners:
                if args.only and args.only not in name:
                    continue
                rows = []
                for trials in (args.trials // 4, args.trials) if args.marginal else (args.trials,):
                    n += 1
                    store, cleanup = store_for(args.store, Path(tmp), n)
                    try:
                        rows.append(anyio.run(cell, executor, trials, latency, parallel, store))
                    finally:
                        if cleanup is not None:
                            cleanup.close()
                row = rows[-1]
                marginal = ""
                if args.marginal:  # the fixed costs (set-up, start of the hosts) cancel out
                    extra = (row["cpu_s"] - rows[0]["cpu_s"]) / (0.75 * args.trials)
                    marginal = f" marginal_cpu_us/trial={extra * 1e6:.0f}"
                print(
                    f"L={latency * 1e3:g}ms P={parallel} {name:12} store={args.store} "
                    f"trials={args.trials} cpu_us/trial={row['cpu_us_per_trial']:.0f}{marginal} "
                    f"trials/s={row['trials_per_s']:,.0f} wall={row['wall_s']:.2f}s "
                    f"wall/ideal={row['wall_over_ideal']:.2f}",
                    flush=True,
                )
    with_hosts = sum(rss_mb(pid) for pid in descendants(os.getpid()))
    print(f"Ray's processes at the end (idle workers kept): {with_hosts:.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=40_000)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--only", help="Run only the runners whose name contains this.")
    parser.add_argument(
        "--marginal",
        action="store_true",
        help="Also run each cell with a quarter of the trials and print the marginal CPU "
        "per trial (the difference over the extra trials: set-up and start-up cancel out).",
    )
    main(parser.parse_args())
