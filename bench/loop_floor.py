"""The floor of wall / ideal on this machine: one asyncio loop, no runner at all.

    python bench/loop_floor.py [--trials 40000] [--latency 0.01] [--parallel 64]
        [--cpu 0 50 100 150 200 250 300]

``--parallel`` workers on one event loop take trials off a shared count; a trial
is ``await asyncio.sleep(latency)`` (the model call) then ``c`` microseconds of
CPU held on the loop (a busy wait: what a runner spends per trial with the GIL
held). Printed per ``c``: wall against the ideal ``N x L / P``. While ``P x c``
stays under ``L`` the trials' phases spread out and the loop keeps up (wall /
ideal near 1, the rest is timer granularity); past it the run is bound by the
loop's CPU, ``N x c`` (wall / ideal about ``P x c / L``). It says what per-trial
CPU a runner needs to meet a wall / ideal target at ``L`` and ``P`` on the
machine it runs on, independently of the runner.
"""

from __future__ import annotations

import argparse
import asyncio
import time


def burn(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


async def run(trials: int, latency: float, parallel: int, cpu: float) -> float:
    left = trials

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await asyncio.sleep(latency)
            burn(cpu)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(parallel)))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=40_000)
    parser.add_argument("--latency", type=float, default=0.01)
    parser.add_argument("--parallel", type=int, default=64)
    parser.add_argument(
        "--cpu",
        type=float,
        nargs="+",
        default=[0, 50, 100, 150, 200, 250, 300],
        help="CPU per trial held on the loop, in microseconds",
    )
    args = parser.parse_args()
    ideal = args.trials * args.latency / args.parallel
    print(
        f"{args.trials:,} trials, L={args.latency * 1e3:g} ms, P={args.parallel}: "
        f"ideal {ideal:.2f} s; the loop keeps up while c < L/P = "
        f"{args.latency / args.parallel * 1e6:.0f} us"
    )
    for c in args.cpu:
        wall = asyncio.run(run(args.trials, args.latency, args.parallel, c * 1e-6))
        print(f"c={c:>5g} us  wall {wall:6.2f} s  wall/ideal {wall / ideal:.2f}", flush=True)


if __name__ == "__main__":
    main()
