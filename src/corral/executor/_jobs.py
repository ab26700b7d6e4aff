"""What travels between the coordinator and its hosts: jobs out, results back.

A job is one admitted execution or evaluation. A result is a plain tuple,
cheap to pickle in batches: ``(kind, t, r, ...)`` with kind

- ``"x"``: an execution ended, not to be evaluated: ``(.., TrialOutcome)``;
- ``"v"``: an execution ended, to be evaluated: ``(.., status, output, next seq)``; the
  host keeps its record for the evaluation (sent to it: ``EvalJob.record`` None);
- ``"d"``: a rate limit deferred it: ``(.., Deferred, scratch, carried usage, worked,
  failed attempts)``;
- ``"e"``: an evaluation ended: ``(.., TrialRecord)``;
- ``"!"``: the runtime raised (a store failure): ``(.., exception)``; the run fails.

Beside jobs, a batch may hold a ``(t, r)`` pair: that trial's evaluation went to
another host, so the host that ran it drops the record it kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._budget import NO_BUDGET, Budget
from .._records import ScoringFacts
from .._types import NO_USAGE, BenchmarkTaskMetadata, TrialRecord, Usage
from ..runtime._trial import Previous


@dataclass(slots=True)
class ExecJob:
    """One trial execution, as a host's `run_trial` needs it (`TrialPlan` less the
    host's own objects: agent, environment, store, acknowledgements)."""

    t: int
    r: int
    task_id: str
    metadata: BenchmarkTaskMetadata
    inputs: Mapping[str, Any]
    previous: Previous | None
    #: The earlier trial the host reads from the store for the reflective session.
    reload: int | None
    may_have_history: bool
    first_attempt: int = 0
    deferrals: int = 0
    scratch: dict[str, Any] | None = None
    carried_usage: Usage = NO_USAGE
    budget: Budget = NO_BUDGET
    #: Seconds worked before a rate limit deferred it.
    worked: float = 0.0
    #: The errors of its attempts that failed before a rate limit deferred it.
    failed_attempts: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class EvalJob:
    """One evaluation: score the trial and commit it at ``seq``. ``record`` None: the
    host that ran the trial kept its record, or (on another host) the store has it."""

    t: int
    r: int
    task_id: str
    environment_id: str
    record: TrialRecord | None
    seq: int
    #: Sent again after its host died: the evaluation may have landed already.
    may_have_history: bool = False
    #: What the scorer is told of the task (`corral._records.for_scorer`).
    facts: ScoringFacts | None = None


Job = ExecJob | EvalJob
Result = tuple[Any, ...]
#: Durable commits a host tells the coordinator's observers of: (task id, trial, commits),
#: one entry for consecutive commits of one trial.
Notice = tuple[str, int, list[Any]]
