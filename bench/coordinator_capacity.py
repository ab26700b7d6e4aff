"""How many trials/s one coordinator can drive when its hosts cost nothing (a cluster).

    PYTHONPATH=src python bench/coordinator_capacity.py [--trials 40000] [--parallel 4096]
        [--hosts 1] [--latency 0] [--repeat 2]

On this 2-core VM the coordinator shares its cores with the hosts, Ray and the
store, so the real cells (bench/ray_executor.py) measure the machine as much as
the coordinator. Here the hosts are load generators instead of `HostActor`: each job
is answered after ``--latency`` seconds on average (uniform in [L/2, 3L/2];
0: at once) with the result a real host
sends for the throughput workload's trial (completed, output 1, then evaluation
passed), and nothing is written to the store. Everything on the coordinator's
side is the real thing: admission, jobs built and pickled, Ray calls (one long
poll per round), results unpickled, records kept, the report. So the
coordinator is the bottleneck, as it is when it drives many hosts, and its CPU
per trial is what bounds one coordinator's trials/s.

Prints per run: trials/s, the coordinator's CPU per trial (whole run, and while
dispatching: without set-up and report), rounds (long polls answered) per
trial, how busy the whole machine was, a calibration (the CPU of a fixed piece
of Python just before the run: the VM's speed then) and the CPU split by thread
as bench/coordinator_cpu.py.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from coordinator_cpu import DispatchClock, busy_ticks, by_thread, cell_arguments, thread_cpu
from ray_executor import cell, init_ray

import corral
from corral import Evaluation, TrialRecord, TrialStatus
from corral.executor import _dispatch
from corral.executor._wire import dumps, loads
from corral.runtime._jobs import EvalJob, Evaluated, Executed

#: The commits a throughput trial has before its evaluation: setup, action,
#: tool_effect, terminal.
_COMMITS = 4


class LoadHost:
    """`HostActor`'s calls, answering each job after ``latency`` with a real host's result for
    the throughput workload, writing nothing (the hosts of a cluster, at no cost here)."""

    latency = 0.0

    def __init__(self, spec: bytes, index: int) -> None:
        self.done: list[Any] = []
        self.wake = asyncio.Event()
        self.closing = asyncio.Event()
        self.spread = random.Random(index)

    def pid(self) -> int:
        return os.getpid()

    async def serve(self) -> None:
        await self.closing.wait()

    async def submit(self, number: int, batch: bytes) -> None:
        await self._take(batch)

    async def _take(self, batch: bytes) -> None:
        loop = asyncio.get_running_loop()
        for job in loads(batch):
            if type(job) is tuple:
                continue
            if self.latency:  # spread, as real trials' durations are
                loop.call_later(self.latency * self.spread.uniform(0.5, 1.5), self._answer, job)
            else:
                self._answer(job)

    def _answer(self, job: Any) -> None:
        if isinstance(job, EvalJob):
            now = time.time()
            record = TrialRecord(
                job.task_id,
                job.r,
                TrialStatus.COMPLETED,
                output=1,
                evaluation=Evaluation(1.0, True),
                commits=_COMMITS,
                started_at=now,
                finished_at=now,
                working_time=self.latency,
            )
            self.done.append(Evaluated(job.t, job.r, record, 1))
        else:
            self.done.append(Executed(job.t, job.r, TrialStatus.COMPLETED, 1, _COMMITS, None))
        self.wake.set()

    async def exchange(self, number: int, batch: bytes) -> bytes:
        await self._take(batch)
        while not self.done:
            await self.wake.wait()
            self.wake.clear()
        done, self.done = self.done, []
        return dumps((done, []))

    async def close(self) -> None:
        self.closing.set()

    async def cancel(self) -> int:
        self.closing.set()
        return 0


class RoundCounter:
    """Counts the hosts' answers the coordinator reads (`RayExecution._answer`, wrapped)."""

    def __init__(self) -> None:
        self.rounds = 0
        inner = _dispatch.RayExecution._answer

        def answer(remote: Any, host: Any, answer: Any, results: Any) -> None:
            self.rounds += 1
            inner(remote, host, answer, results)

        _dispatch.RayExecution._answer = answer  # type: ignore[method-assign]


def calibration_ms() -> float:
    """CPU of a fixed piece of the coordinator's kind of work (20,000 records made,
    pickled and read back): the VM's speed at that moment, to compare runs made
    minutes apart (on this shared VM it moved by up to 2x within an hour)."""
    gc.collect()
    gc.disable()  # the same work whatever the heap holds
    started = time.process_time()
    records = [
        TrialRecord(f"t{i}", 0, TrialStatus.COMPLETED, 1, Evaluation(1.0, True), commits=4)
        for i in range(20_000)
    ]
    loads(dumps(records))
    spent = time.process_time() - started
    gc.enable()
    return spent * 1e3


def main(args: argparse.Namespace) -> None:
    init_ray()
    LoadHost.latency = args.latency
    _dispatch.HostActor = LoadHost  # type: ignore[misc,assignment]
    dispatch, rounds = DispatchClock(), RoundCounter()
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.repeat):
            executor = corral.RayExecutor(hosts=args.hosts, host_options={"num_cpus": 0})
            store = corral.SQLiteStore(Path(tmp) / f"store{n}.db")
            dispatch.reset()
            rounds.rounds = 0
            calibration = calibration_ms()
            before, cpu, machine = thread_cpu(), time.process_time(), busy_ticks()
            # `cell`'s latency only makes its agent (which load hosts never run) and its
            # wall/ideal (not printed): the load hosts make the wait.
            row = anyio.run(
                functools.partial(cell, stored=False),
                executor,
                args.trials,
                1.0,
                args.parallel,
                store,
            )
            cpu, after = time.process_time() - cpu, thread_cpu()
            busy, whole = (b - a for a, b in zip(machine, busy_ticks(), strict=True))
            shares = by_thread(before, after, cpu, args.trials)
            print(
                f"P={args.parallel} hosts={args.hosts} L={args.latency * 1e3:g}ms "
                f"trials={args.trials} trials/s={row['trials_per_s']:,.0f} "
                f"(dispatching {args.trials / dispatch.wall:,.0f}) "
                f"cpu_us/trial={cpu / args.trials * 1e6:.0f} "
                f"dispatch_us/trial={dispatch.cpu / args.trials * 1e6:.0f} "
                f"trials/round={args.trials / max(rounds.rounds, 1):.1f} "
                f"machine busy {busy / whole:.0%} calibration {calibration:.0f} ms ({shares})",
                flush=True,
            )


if __name__ == "__main__":
    main(cell_arguments(__doc__, 40_000, 0.0, 4096).parse_args())
