"""CPU per trial on the Ray hosts themselves (their processes' user + system time).

    PYTHONPATH=src python bench/host_cpu.py [--trials 8000] [--latency 0.01]
        [--parallel 64] [--hosts 1] [--store sqlite|postgres] [--repeat 2]

Runs the cell of bench/ray_executor.py and, just before the hosts are stopped,
reads each host process's CPU from /proc (a host is a fresh Ray worker process: its
CPU from its start is its set-up and its trials). Beside it, the coordinator's CPU
per trial (time.process_time). Linux only; hosts on this machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from coordinator_cpu import cell_arguments
from ray_executor import cell, init_ray, store_for

import corral
from corral.executor import _dispatch

_TICK = os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


class HostClock:
    """Reads the hosts' CPU as the run stops them (the execution's ``_stop``, wrapped)."""

    def __init__(self) -> None:
        self.cpu = 0.0
        execution: Any = getattr(_dispatch, "RayExecution", None) or _dispatch.RayRemote
        inner = execution._stop

        def stop(remote: Any, cancelled: bool) -> None:
            import ray

            for host in remote.hosts:
                self.cpu += process_cpu(ray.get(host.actor.pid.remote(), timeout=60))
            inner(remote, cancelled)

        execution._stop = stop  # the hosts die with it


def main(args: argparse.Namespace) -> None:
    init_ray()
    hosts = HostClock()
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.repeat):
            executor = corral.RayExecutor(hosts=args.hosts, host_options={"num_cpus": 0})
            store, databases = store_for(args.store, Path(tmp), n)
            hosts.cpu, cpu = 0.0, time.process_time()
            row = anyio.run(cell, executor, args.trials, args.latency, args.parallel, store, False)
            cpu = time.process_time() - cpu
            if databases is not None:
                databases.close()
            print(
                f"L={args.latency * 1e3:g}ms P={args.parallel} hosts={args.hosts} "
                f"coordinator_cpu_us/trial={cpu / args.trials * 1e6:.0f} "
                f"host_cpu_us/trial={hosts.cpu / args.trials * 1e6:.0f} "
                f"trials/s={row['trials_per_s']:,.0f}",
                flush=True,
            )


if __name__ == "__main__":
    parser = cell_arguments(__doc__, 8_000, 0.0, 64)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    main(parser.parse_args())
