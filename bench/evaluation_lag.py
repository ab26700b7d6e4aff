"""How far behind its trial an evaluation runs when agents never wait.

    python bench/evaluation_lag.py [--tasks 200] [--parallel 1 4 16] [--backend asyncio trio]

Agents that answer at once and a scorer that scores at once, on the memory store.
Printed per backend and ``max_parallel``: the most trials started between a trial's
start and its scoring (a worker that starts each next trial at once must still
leave the evaluations it handed out room to run: a handful of rounds of P at most).
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio

from corral import BenchmarkTaskMetadata, CorralRunner, Evaluation, Final, MemoryStore
from corral.testing import FakeEnvironment, ScriptedAgent


async def scoring_order(tasks: int, parallel: int) -> list[tuple[str, str]]:
    """("act", task) as each trial starts and ("score", task) as it is scored, in order,
    for ``tasks`` one-trial tasks ``t00000``, ... run at ``max_parallel=parallel``."""
    seen: list[tuple[str, str]] = []

    def decide(session: Any) -> Final:
        seen.append(("act", session.task_id))
        return Final("out")

    def evaluate(record: Any) -> Evaluation:
        seen.append(("score", record.task_id))
        return Evaluation(1.0, True)

    runner = CorralRunner(
        {f"t{i:05d}": BenchmarkTaskMetadata("a", "e") for i in range(tasks)},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment(evaluate=evaluate)},
        store=MemoryStore(),
    )
    await runner.run("lag", max_parallel=parallel)
    return seen


def most_behind(seen: list[tuple[str, str]]) -> int:
    """The most trials started between a trial's start and its scoring."""
    started: dict[str, int] = {}
    acts = worst = 0
    for kind, task in seen:
        if kind == "act":
            acts += 1
            started[task] = acts
        else:
            worst = max(worst, acts - started[task])
    return worst


async def lag(tasks: int, parallel: int) -> int:
    return most_behind(await scoring_order(tasks, parallel))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--parallel", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--backend", nargs="+", default=["asyncio", "trio"])
    args = parser.parse_args()
    for backend in args.backend:
        for parallel in args.parallel:
            worst = anyio.run(lag, args.tasks, parallel, backend=backend)
            print(
                f"{backend} P={parallel}: at most {worst} trials started between a trial's "
                "start and its scoring"
            )


if __name__ == "__main__":
    main()
