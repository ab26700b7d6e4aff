"""Make tests/data/v1_store with Corral bee6a90: a subset run that adds a parent by
closure, then a resumed run, and the report file it wrote."""

import shutil
import sys
from pathlib import Path

import anyio

from corral import BenchmarkTaskMetadata, CorralRunner, Evaluation, Final, RetryPolicy
from corral.testing import FakeEnvironment, ScriptedAgent

out = Path(sys.argv[1])
shutil.rmtree(out, ignore_errors=True)


def decide(s):
    s.record_usage(input_tokens=3, output_tokens=1, cost=0.5)
    return Final({"trial": s.trial})


def evaluate(r):
    return Evaluation(float(r.trial != 1), r.trial != 1)


TASKS = {
    "parent": BenchmarkTaskMetadata("a", "e"),
    "child": BenchmarkTaskMetadata("a", "e", dependencies=("parent",)),
    "other": BenchmarkTaskMetadata("a", "e"),
}


def runner():
    return CorralRunner(
        TASKS,
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment(evaluate=evaluate)},
        store=out / "store.db",
        retry_policy=RetryPolicy(max_retries=0),
    )


async def main():
    await runner().run(
        "old", task_ids=["child"], trials_per_task=2, k_values=(1, 2), token_limit=1000
    )
    r = await runner().run(
        "old", task_ids=["child"], trials_per_task=2, k_values=(1, 2), token_limit=1000
    )
    print(r.resumed, r.added_by_dependencies, r.budgets)


anyio.run(main)
