"""Trials per second and peak RSS for N one-step trials (no agent latency, or ``--latency``).

python bench/throughput.py --trials 10000 --max-parallel 64 [--store sqlite|memory]
    [--heads kept|off] [--to-last-commit] [--latency 0]

``--latency L`` makes the agent await ``sleep(L)`` (its model call) before its
step, as in the benchmark workload: `instructions.py --latency` counts what a
trial costs when its agent waits (a worker's end then costs no turn of the loop).

``--heads off`` switches the SQLite writer's head upkeep off in this process (as
`bench/heads_cost.py` does): the commits are written as before, no trial head is
folded or written, and the report (read from heads) counts none, so the trials
counted are those asked for. ``--to-last-commit`` ends the process (printing what
it counted so far) as the last trial's evaluation is committed, before the report:
`instructions.py --heads` counts the two variants this way, since without heads the
report reads none and would cost nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import anyio

import corral
from corral import Action, BenchmarkTaskMetadata, Evaluation, Final, ToolEffect


class OneStepAgent:
    def __init__(self, latency: float = 0.0) -> None:
        self.latency = latency

    async def act(self, session: corral.AgentSession) -> Action | Final:
        if session.iteration:
            return Final(session.state)
        if self.latency:
            await anyio.sleep(self.latency)
        return Action("step", {"n": 1})


class CountingEnvironment:
    async def setup(self, session: corral.AgentSession) -> int:
        return 0

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        return ToolEffect("ok", session.state + action.arguments["n"])

    async def evaluate(self, trial: corral.TrialRecord) -> Evaluation:
        return Evaluation(1.0, trial.output == 1)


class TaskSampler:
    """Samples live asyncio tasks on every commit (cheap: a len of a weak set)."""

    def __init__(self) -> None:
        self.peak = 0

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        n = len(asyncio.all_tasks())
        if n > self.peak:
            self.peak = n


class GcTimer:
    """Wall time spent in the garbage collector, via gc.callbacks."""

    def __init__(self) -> None:
        self.total = 0.0
        self._start = 0.0
        gc.callbacks.append(self)

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.total += time.perf_counter() - self._start


class LastCommit:
    """Ends the process when the last of ``trials`` evaluations is committed (the run
    up to its last commit, without its report), removing the store's directory."""

    def __init__(self, trials: int, directory: str) -> None:
        self.left = trials
        self.directory = directory

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        if commit.kind == "evaluation":
            self.left -= 1
            if not self.left:
                print(f"stopped at the last commit of {key}", flush=True)
                shutil.rmtree(self.directory, ignore_errors=True)
                os._exit(0)


async def main(args: argparse.Namespace) -> None:
    if args.heads == "off":
        from heads_cost import patch_out_heads

        patch_out_heads()
    gc_timer = GcTimer()
    tasks = {
        f"t{i}": BenchmarkTaskMetadata("agent", "env", model="m")
        for i in range(args.trials // args.per_task)
    }
    with tempfile.TemporaryDirectory() as tmp:
        store: corral.CommitStore = (
            corral.SQLiteStore(Path(tmp) / "store.db", synchronous=args.synchronous)
            if args.store == "sqlite"
            else corral.MemoryStore()
        )
        agents = {"agent": OneStepAgent(args.latency)}
        runner = corral.CorralRunner(tasks, agents, {"env": CountingEnvironment()}, store=store)
        sampler = TaskSampler()
        observers: list[object] = [sampler] if args.sample_tasks else []
        if args.to_last_commit:
            observers.append(LastCommit(args.trials, tmp))
        start = time.perf_counter()
        cpu = time.process_time()
        report = await runner.run(
            "throughput",
            trials_per_task=args.per_task,
            max_parallel=args.max_parallel,
            max_parallel_per_task=args.per_task,
            observers=observers,
        )
        wall = time.perf_counter() - start
        cpu = time.process_time() - cpu
    trials = sum(report.counts.values()) if args.heads == "kept" else args.trials
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"store={args.store}{'/' + args.synchronous if args.store == 'sqlite' else ''} "
        f"trials={trials} max_parallel={args.max_parallel} "
        f"wall={wall:.2f}s cpu={cpu:.2f}s cpu_us/trial={cpu / trials * 1e6:.0f} "
        f"trials/s={trials / wall:,.0f} peak_rss={rss_mb:.0f}MB "
        f"peak_live_tasks={sampler.peak if args.sample_tasks else 'n/a'} "
        f"passed={report.pass_at_k.get(1, math.nan):.3f} gc_s={gc_timer.total:.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--per-task", type=int, default=1)
    parser.add_argument("--max-parallel", type=int, default=64)
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--sample-tasks", action="store_true")
    parser.add_argument("--synchronous", choices=["NORMAL", "FULL"], default="NORMAL")
    parser.add_argument("--heads", choices=["kept", "off"], default="kept")
    parser.add_argument("--to-last-commit", action="store_true")
    parser.add_argument("--latency", type=float, default=0.0)
    parsed = parser.parse_args()
    if parsed.heads == "off" and parsed.store != "sqlite":
        parser.error("--heads off: the SQLite store only")
    anyio.run(main, parsed)
