"""Live asyncio tasks while 512 trials wait at max_parallel=8 (the failure in seeds/004).

    python bench/bounded_admission.py [--trials 512 --max-parallel 8]

Every agent blocks on one gate; once everything is blocked the script counts
the live asyncio tasks, opens the gate and lets the run finish.
"""

from __future__ import annotations

import argparse
import asyncio

import anyio

import corral
from corral import BenchmarkTaskMetadata, Final
from corral.testing import FakeEnvironment, Gate, ScriptedAgent, wait_all_tasks_blocked


async def main(args: argparse.Namespace) -> None:
    gate = Gate()
    tasks = {f"t{i}": BenchmarkTaskMetadata("a", "e") for i in range(args.trials)}
    runner = corral.CorralRunner(
        tasks,
        {"a": ScriptedAgent(lambda s: Final(1), gate=gate)},
        {"e": FakeEnvironment()},
        store=corral.MemoryStore(),
    )
    baseline = len(asyncio.all_tasks())
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: runner.run("bounded", max_parallel=args.max_parallel))
        await wait_all_tasks_blocked()
        live = len(asyncio.all_tasks()) - baseline
        print(
            f"trials={args.trials} max_parallel={args.max_parallel} agents_waiting={gate.waiting} "
            f"live_asyncio_tasks_of_the_run={live} (the run's own task included)"
        )
        gate.open()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=512)
    parser.add_argument("--max-parallel", type=int, default=8)
    anyio.run(main, parser.parse_args())
