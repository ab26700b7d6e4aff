"""CPU per trial on a Ray host against the in-process runner's, on the same trials.

    PYTHONPATH=src python bench/host_cpu.py [--trials 8000] [--latency 0.01]
        [--parallel 64] [--hosts 1] [--store sqlite|postgres] [--repeat 2]
        [--in-process] [--profile DIR]

Runs the cell of bench/ray_executor.py ``--repeat`` times on one local Ray and
prints, per run, the hosts' CPU per trial (user + system time of each host
process, read from /proc): ``host_cpu_us/trial`` from the moment each host has
started (its actor made, the run's objects unpickled: what a run pays once per
host) until it is stopped, i.e. what its trials cost it, and ``host_total`` from
the process's start (Ray's worker start-up and the imports included). Beside it,
the coordinator's CPU per trial (time.process_time), and the coordinator's long
polls: how many, the results each brought, and their round trip (sent until the
answer is handled on the run loop). With ``--in-process``, each
repeat first runs the same cell in this process (time.process_time over `run`:
admission, the store, the report, everything) and prints the ratio host /
in-process of that pair. With ``--profile DIR``, hosts run under cProfile and
write ``DIR/host-<run>-<index>.prof`` as they stop (CPU figures then include the
profiler's). Linux only; hosts on this machine.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import tempfile
import threading
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


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds by thread name of process ``pid`` (threads of one name summed; the
    main thread, which runs a host's event loop, as "loop")."""
    out: dict[str, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = "loop" if tid == str(pid) else stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / _TICK
    return out


class HostClock:
    """Reads each host's CPU once it has started (from a thread: the run loop goes on)
    and as the run stops it (the execution's ``_stop``, wrapped)."""

    def __init__(self) -> None:
        self.reset()
        execution: Any = _dispatch.RayExecution
        start, stop = execution.start, execution._stop

        def started(remote: Any, tg: Any) -> None:
            start(remote, tg)
            for host in remote.hosts:
                threading.Thread(target=self._read_start, args=(host.actor,)).start()

        def stopped(remote: Any, cancelled: bool) -> None:
            for host in remote.hosts:
                pid = self.pids.get(id(host.actor))
                if pid is not None:
                    cpu = process_cpu(pid)
                    self.total += cpu
                    self.cpu += cpu - self.at_start[pid]
                    before = self.threads_at_start[pid]
                    for name, seconds in thread_cpu(pid).items():
                        spent = seconds - before.get(name, 0.0)
                        self.threads[name] = self.threads.get(name, 0.0) + spent
            stop(remote, cancelled)

        execution.start, execution._stop = started, stopped  # the hosts die with `_stop`

    def reset(self) -> None:
        self.cpu = self.total = 0.0
        self.pids: dict[int, int] = {}
        self.at_start: dict[int, float] = {}
        self.threads_at_start: dict[int, dict[str, float]] = {}
        #: CPU seconds by thread name over the run (the hosts' threads of one name summed).
        self.threads: dict[str, float] = {}

    def _read_start(self, actor: Any) -> None:
        import ray

        pid = ray.get(actor.pid.remote(), timeout=120)  # answered once the actor is made
        self.at_start[pid] = process_cpu(pid)
        self.threads_at_start[pid] = thread_cpu(pid)
        self.pids[id(actor)] = pid


class Rounds:
    """The coordinator's long polls, from its side: each sent (`_poll`) until its answer
    is handled on the run loop (`_answer`), and that answer until the next poll."""

    def __init__(self) -> None:
        self.reset()
        execution: Any = _dispatch.RayExecution
        poll, answer = execution._poll, execution._answer

        def polled(remote: Any, host: Any, jobs: bytes) -> None:
            now = time.perf_counter()
            if id(host) in self.answered:
                self.turnaround.append(now - self.answered.pop(id(host)))
            self.sent[id(host)] = now
            poll(remote, host, jobs)

        def answered(remote: Any, host: Any, reply: Any, results: list[Any]) -> None:
            now = time.perf_counter()
            if id(host) in self.sent:
                self.trip.append(now - self.sent.pop(id(host)))
            self.answered[id(host)] = now
            if not isinstance(reply, BaseException):
                self.results += len(reply[0])
            answer(remote, host, reply, results)

        execution._poll, execution._answer = polled, answered

    def reset(self) -> None:
        self.sent: dict[int, float] = {}
        self.answered: dict[int, float] = {}
        self.trip: list[float] = []
        self.turnaround: list[float] = []
        self.results = 0

    def summary(self) -> str:
        if not self.trip:
            return "no rounds"

        def ms(spans: list[float]) -> str:
            spans = sorted(spans)
            median, p90 = spans[len(spans) // 2], spans[int(0.9 * (len(spans) - 1))]
            return f"{median * 1e3:.1f}/{p90 * 1e3:.1f}"

        return (
            f"rounds {len(self.trip)}, {self.results / len(self.trip):.1f} results a round; "
            f"poll to answer handled {ms(self.trip)} ms, answer to the next poll "
            f"{ms(self.turnaround or [0.0])} ms (median/p90)"
        )


class ProfiledHostActor(_dispatch.HostActor):
    """A host under cProfile (its event loop's thread), its statistics written as it stops."""

    def __init__(self, spec: bytes, index: int) -> None:
        super().__init__(spec, index)
        self._profile_path = os.environ["CORRAL_HOST_PROFILE"] + f"-{index}.prof"

    async def serve(self) -> None:
        profile = cProfile.Profile()
        profile.enable()
        try:
            await super().serve()
        finally:
            profile.disable()
            profile.dump_stats(self._profile_path)


def main(args: argparse.Namespace) -> None:
    init_ray()
    hosts = HostClock()
    rounds = Rounds()
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        _dispatch.HostActor = ProfiledHostActor  # type: ignore[misc]
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.repeat):
            local = None
            if args.in_process:
                store, databases = store_for(args.store, Path(tmp), 2 * n)
                row = anyio.run(cell, None, args.trials, args.latency, args.parallel, store)
                if databases is not None:
                    databases.close()
                local = row["cpu_us_per_trial"]
                print(
                    f"L={args.latency * 1e3:g}ms P={args.parallel} in-process "
                    f"cpu_us/trial={local:.0f} trials/s={row['trials_per_s']:,.0f}",
                    flush=True,
                )
            host_options: dict[str, Any] = {"num_cpus": 0}
            if args.profile:
                path = str(Path(args.profile).resolve() / f"host-{n}")
                host_options["runtime_env"] = {"env_vars": {"CORRAL_HOST_PROFILE": path}}
            executor = corral.RayExecutor(hosts=args.hosts, host_options=host_options)
            store, databases = store_for(args.store, Path(tmp), 2 * n + 1)
            hosts.reset()
            rounds.reset()
            cpu = time.process_time()
            row = anyio.run(cell, executor, args.trials, args.latency, args.parallel, store)
            cpu = time.process_time() - cpu
            if databases is not None:
                databases.close()
            host = hosts.cpu / args.trials * 1e6
            ratio = f" host/in-process={host / local:.2f}" if local else ""
            split = ", ".join(
                f"{name} {seconds / args.trials * 1e6:.0f}"
                for name, seconds in sorted(hosts.threads.items(), key=lambda kv: -kv[1])
                if seconds > 0
            )
            print(
                f"L={args.latency * 1e3:g}ms P={args.parallel} hosts={args.hosts} "
                f"store={args.store} host_cpu_us/trial={host:.0f}{ratio} "
                f"host_total_us/trial={hosts.total / args.trials * 1e6:.0f} "
                f"coordinator_cpu_us/trial={cpu / args.trials * 1e6:.0f} "
                f"trials/s={row['trials_per_s']:,.0f} (host threads: {split})\n  "
                + rounds.summary(),
                flush=True,
            )


if __name__ == "__main__":
    parser = cell_arguments(__doc__, 8_000, 0.0, 64)
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument(
        "--in-process", action="store_true", help="Run the cell in this process before each."
    )
    parser.add_argument("--profile", help="A directory for the hosts' cProfile statistics.")
    main(parser.parse_args())
