"""The built-in demo: a small agent benchmark with no network and no keys.

Two simulated models work two environments: a number search (sequential
tool calls, sloppy guesses, reflective retries after a failed trial) and a
calculator service (parallel tool calls, flaky calls that are retried, a
grader with an answer key), plus a ``bid-plan -> bid-build -> bid-verify``
chain whose children read their parent's output from ``session.inputs``.
Every choice is seeded per (task, trial, turn), so results are deterministic;
``latency`` scales the simulated waits (0 for tests).
"""

from __future__ import annotations

import random

from .._benchmark import Benchmark
from ..runtime import RetryPolicy
from ._calculator import CalculatorAgent, CalculatorEnvironment
from ._models import MODELS, Pace
from ._search import BisectAgent, SearchEnvironment
from ._tasks import demo_tasks

__all__ = ["build_demo", "demo_retry_policy"]


def build_demo(latency: float = 1.0) -> Benchmark:
    """The demo benchmark, with its run settings (4 trials, k = 1, 2, 4, limits)."""
    pace = Pace(latency)
    tasks, answers = demo_tasks(tuple(MODELS))
    return Benchmark(
        tasks=tasks,
        agents={"bisect": BisectAgent(pace), "calculator": CalculatorAgent(pace)},
        environments={
            "search": SearchEnvironment(pace),
            "calculator": CalculatorEnvironment(pace, answers),
        },
        run_defaults={
            "trials_per_task": 4,
            "k_values": (1, 2, 4),
            "max_parallel": 8,
            "max_parallel_per_task": 1,
            "max_parallel_evaluations": 3,
            "max_parallel_by_model": {"sim-large": 3, "sim-small": 5},
            "max_parallel_by_environment": {"calculator": 4},
            "max_parallel_evaluations_by_environment": {"search": 1},
        },
    )


def demo_retry_policy(latency: float = 1.0) -> RetryPolicy:
    """Two retries with short, seeded backoff (the calculator service is flaky)."""
    return RetryPolicy(max_retries=2, backoff_base=0.05 * latency, rng=random.Random(0))
