"""The demo's tasks: number search and arithmetic on two models, plus a bid chain."""

from __future__ import annotations

import random
import re
from typing import Any

from .._types import BenchmarkTaskMetadata
from ._calculator import expected_answer, line_pairs

SEARCH_RANGES = (50, 100, 200, 500, 1000)
ARITHMETIC_PROBLEMS = 4
DEMO_TOKEN_LIMIT = 6_000
BID_ITEMS = (
    {"name": "standing desk", "qty": 3, "price": 419},
    {"name": "monitor arm", "qty": 6, "price": 89},
    {"name": "task chair", "qty": 4, "price": 265},
    {"name": "cable tray", "qty": 12, "price": 17},
    {"name": "desk lamp", "qty": 5, "price": 38},
)


PLAN = (
    "Price each line of the order: qty times price, with the mul tool. "
    'Answer {"lines": [the line totals, in order]}.'
)
BUILD = 'Add up the line totals that bid-plan gave, with the add tool. Answer {"subtotal": n}.'
VERIFY = (
    "Recompute the order's subtotal from its lines with the tools and check the one "
    'bid-build reported. Answer {"subtotal": n, "reported": m, "approved": true or false}.'
)


def _short(model: str) -> str:
    """A model's name as a task id suffix: ``sim-large`` -> ``large``, ``org/m:7b`` -> ``m-7b``."""
    name = model.rsplit("/", 1)[-1].removeprefix("sim-")
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name) or "model"


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
                agent_id=model,
                environment_id="search",
                model=model,
                max_iterations=high.bit_length() + 1,
                # The widest search runs long: a token budget ends its longest trials
                # with status `limit` (shown in the table), as a real budget would.
                token_limit=DEMO_TOKEN_LIMIT if high == max(SEARCH_RANGES) else None,
                inputs={
                    "high": high,
                    "prompt": f"Find the hidden number between 1 and {high} with the guess "
                    "tool, then answer with the number.",
                },
            )
    for model in models:
        for i, problem in enumerate(_problems(), start=1):
            terms = " + ".join(f"{a}*{b}" for a, b in problem["pairs"])
            tasks[f"arith-{i}-{_short(model)}"] = BenchmarkTaskMetadata(
                agent_id=model,
                environment_id="calculator",
                model=model,
                max_iterations=6,
                inputs={
                    **problem,
                    "prompt": f"Compute {terms} - {problem['minus']} with the calculator "
                    "tools, then answer with the number.",
                },
            )
    pairs = line_pairs(BID_ITEMS)
    chain = (
        ("bid-plan", "plan", models[-1], (), PLAN),
        ("bid-build", "build", models[0], ("bid-plan",), BUILD),
        ("bid-verify", "verify", models[-1], ("bid-build",), VERIFY),
    )
    for task_id, kind, model, parents, prompt in chain:
        tasks[task_id] = BenchmarkTaskMetadata(
            agent_id=model,
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
