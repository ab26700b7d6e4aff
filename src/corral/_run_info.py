"""`RunInfo`: what an observer learns about the run it watches (the runner builds it;
watchers read it without importing the runner)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from ._concurrency import ScopeStatistics
from ._types import TrialRecord
from .scheduler import Limits, RunPlan, Statistics


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What an observer with ``on_run_start`` learns about the run it watches."""

    benchmark_id: str
    plan: RunPlan
    limits: Limits
    eval_keys: tuple[str, ...]
    statistics: Callable[[], Statistics]
    resumed: int
    #: The run's named concurrency scopes (and its subprocess bound), by name.
    scopes: Callable[[], Mapping[str, ScopeStatistics]] = dict
    #: The records of the trials an earlier run finished (read it in ``on_run_start``:
    #: the run lets go of them after it).
    resumed_records: Iterable[TrialRecord] = ()
    #: The run-wide budgets, by name (``token_limit``, ..., ``run_cost_limit``).
    budgets: Mapping[str, float] = field(default_factory=dict)
    #: With a ``run_cost_limit``: the cost recorded by every run of the benchmark so far
    #: (what the limit is compared with).
    spent: Callable[[], float] = float
