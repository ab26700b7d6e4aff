"""A runner of one scripted agent and one fake environment: the shape most report
tests run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from corral import BenchmarkTaskMetadata, CorralRunner, Evaluation, RetryPolicy, TrialRecord
from corral.testing import FakeEnvironment, ScriptedAgent


def scripted_runner(
    tasks: Mapping[str, BenchmarkTaskMetadata],
    decide: Callable[..., Any],
    evaluate: Callable[[TrialRecord], Evaluation],
    store: Any,
) -> CorralRunner:
    """Agent ``a`` deciding each turn with ``decide``, environment ``e`` scoring with
    ``evaluate``, on ``store``; no retries (a failure is the trial's end)."""
    return CorralRunner(
        tasks,
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment(evaluate=evaluate)},
        store=store,
        retry_policy=RetryPolicy(max_retries=0),
    )
