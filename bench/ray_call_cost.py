"""What one call to an async Ray actor costs in CPU, on either side, with Ray's task
events recorded and not (Corral's hosts and scope hub keep theirs out of them).

    python bench/ray_call_cost.py [--calls 4000] [--repeat 3] [--reply-bytes 1300]

Calls are made one after another (``ray.get`` of each), as a host's long poll is: the
actor process's CPU (user + system, /proc: its event loop, Ray's threads) and the
caller's (`time.process_time`) per call, and the wall time per call. The reply is
bytes of a long poll's median answer (``--reply-bytes``). Pairs alternate: recorded,
not recorded. Linux only.
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

from host_cpu import process_cpu


class Echo:
    def pid(self) -> int:
        return os.getpid()

    async def exchange(self, number: int, reply: bytes) -> bytes:
        return reply


def measure(ray: Any, events: bool, calls: int, reply: bytes) -> str:
    actor = ray.remote(Echo).options(max_concurrency=16, enable_task_events=events, num_cpus=0)
    echo = actor.remote()
    try:
        pid = ray.get(echo.pid.remote())
        ray.get([echo.exchange.remote(0, reply) for _ in range(200)])  # warm up
        actor_cpu, caller_cpu, wall = process_cpu(pid), time.process_time(), time.perf_counter()
        for number in range(calls):
            ray.get(echo.exchange.remote(number, reply))
        actor_cpu = process_cpu(pid) - actor_cpu
        caller_cpu = time.process_time() - caller_cpu
        wall = time.perf_counter() - wall
    finally:
        ray.kill(echo)
    return (
        f"task_events={'on ' if events else 'off'} actor {actor_cpu / calls * 1e6:4.0f} us/call, "
        f"caller {caller_cpu / calls * 1e6:4.0f} us/call, wall {wall / calls * 1e6:5.0f} us/call"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=4_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reply-bytes", type=int, default=1_300)
    args = parser.parse_args()
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        for _ in range(args.repeat):
            for events in (True, False):
                print(measure(ray, events, args.calls, b"x" * args.reply_bytes), flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
