"""The demo's tasks: number search and arithmetic on two models, plus a bid chain."""

from __future__ import annotations

import random
from typing import Any

from .._types import BenchmarkTaskMetadata
from ._calculator import expected_answer, line_pairs

SEARCH_RANGES = (50, 100, 200, 500, 1000)
ARITHMETIC_PROBLEMS = 4
BID_ITEMS = (
    {"name": "standing desk", "qty": 3, "price": 419},
    {"name": "monitor arm", "qty": 6, "price": 89},
    {"name": "task chair", "qty": 4, "price": 265},
    {"name": "cable tray", "qty": 12, "price": 17},
    {"name": "desk lamp", "qty": 5, "price": 38},
)


def _short(model: str) -> str:
    return model.removeprefix("sim-")


def _problems() -> list[dict[str, Any]]:
    # A fixed seed: every run (and both models) gets the same problems.
    rng = random.Random("corral-demo-arithmetic")
    problems = []
    for _ in range(ARITHMETIC_PROBLEMS):
        pairs = [[rng.randint(3, 99), rng.randint(3, 99)] for _ in range(rng.randint(3, 5))]
        problems.append({"pairs": pairs, "minus": rng.randint(1, 60)})
    return problems


def demo_tasks(models: tuple[str, ...]) -> tuple[dict[str, BenchmarkTaskMetadata], dict[str, Any]]:
    """The task table and the calculator's answer key."""
    tasks: dict[str, BenchmarkTaskMetadata] = {}
    for model in models:
        for high in SEARCH_RANGES:
            tasks[f"guess-{high}-{_short(model)}"] = BenchmarkTaskMetadata(
                agent_id="bisect",
                environment_id="search",
                model=model,
                max_iterations=high.bit_length() + 1,
                inputs={"high": high, "prompt": f"Find the hidden number between 1 and {high}."},
            )
    for model in models:
        for i, problem in enumerate(_problems(), start=1):
            terms = " + ".join(f"{a}*{b}" for a, b in problem["pairs"])
            tasks[f"arith-{i}-{_short(model)}"] = BenchmarkTaskMetadata(
                agent_id="calculator",
                environment_id="calculator",
                model=model,
                max_iterations=6,
                inputs={**problem, "prompt": f"Compute {terms} - {problem['minus']}."},
            )
    pairs = line_pairs(BID_ITEMS)
    chain = (
        ("bid-plan", "plan", models[-1], (), "Price each line of the order."),
        ("bid-build", "build", models[0], ("bid-plan",), "Add the line prices up."),
        ("bid-verify", "verify", models[-1], ("bid-build",), "Check the subtotal."),
    )
    for task_id, kind, model, parents, prompt in chain:
        tasks[task_id] = BenchmarkTaskMetadata(
            agent_id="calculator",
            environment_id="calculator",
            model=model,
            max_iterations=6,
            dependencies=parents,
            inputs={"kind": kind, "items": list(BID_ITEMS), "pairs": pairs, "prompt": prompt},
        )
    answers = {
        task_id: expected_answer(meta.inputs)
        for task_id, meta in tasks.items()
        if meta.environment_id == "calculator"
    }
    return tasks, answers
