"""What an executor is given and gives back: admitted jobs out, typed results in.

A job is one admitted execution (`TrialJob`) or evaluation (`EvalJob`), built
by the run loop and run wherever its executor runs it (a worker task here, a
Ray host). `TrialJob` is everything a trial carries from one start to the
next (a rate limit's deferral hands the same job back, scratch and all); what
the place it runs on supplies (agent, environment, store) is `TrialPlan`'s.
A result is one of `Executed`, `Postponed`, `Evaluated`; the run loop reacts
to nothing else. Jobs and results are built per trial: plain dataclasses, never
changed once handed over (a frozen one's ``__init__`` costs several times more).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._budget import NO_BUDGET, Budget
from .._records import ScoringFacts
from .._types import (
    NO_USAGE,
    BenchmarkTaskMetadata,
    Commit,
    Evaluation,
    TrialRecord,
    TrialStatus,
    Usage,
    slot_builder,
)
from ..history import CommitKind, encode, reopen
from ._model_calls import CallLog  # noqa: TC001 (a dataclass field's type)


@dataclass(frozen=True, slots=True)
class Previous:
    """The earlier trial a reflective session sees."""

    trial: int
    evaluation: Evaluation | None
    state: Any
    #: How it ended (``"limit"``: scored, but never counted as passed).
    status: str | None = None


#: ``Previous(trial, evaluation, state, status)``, the same object (`slot_builder`): the
#: run keeps one for each finished trial a later one of its task follows.
new_previous: Callable[[int, Evaluation | None, Any, str | None], Previous] = slot_builder(Previous)


@dataclass(frozen=True, slots=True)
class Deferred:
    """The trial hit a rate limit: wait ``delay`` seconds, then continue from its head."""

    delay: float
    attempt: int
    retry_after: float | None


@dataclass(slots=True)
class TrialJob:
    """One trial execution, as admitted: trial ``r`` of task ``t`` (``task_id``)."""

    t: int
    r: int
    task_id: str
    metadata: BenchmarkTaskMetadata
    inputs: Mapping[str, Any]
    previous: Previous | None = None
    #: The earlier trial to read from the store for the reflective session (None: none,
    #: or ``previous`` is it).
    reload: int | None = None
    may_have_history: bool = False
    #: Attempts already used before a rate limit deferred this trial.
    first_attempt: int = 0
    #: How many times a rate limit has deferred this trial (for its backoff).
    deferrals: int = 0
    #: The agent's scratch, kept while a rate limit defers the trial.
    scratch: dict[str, Any] | None = None
    #: Usage recorded before a rate limit that no commit has carried yet.
    carried_usage: Usage = NO_USAGE
    #: The trial's next sequence number when a rate limit last deferred it: a longer
    #: history when it goes on was written by a host that died since, which carried
    #: what the job carries (its usage, its model calls) already.
    deferred_at: int = 0
    #: What the trial may spend (the task's budgets over the run's).
    budget: Budget = NO_BUDGET
    #: Seconds worked before a rate limit deferred this trial (its commits may hold less).
    worked: float = 0.0
    #: Seconds the attempt a rate limit deferred had worked: it goes on with the rest of
    #: its ``trial_timeout``, which bounds an attempt's work, not each stretch of it.
    attempt_worked: float = 0.0
    #: The errors of the attempts that failed and were retried (see `_attempt_errors`).
    failed_attempts: list[dict[str, Any]] = field(default_factory=list)
    #: The sequence number of this run's first commit of the trial: the commits before
    #: it, earlier runs recorded (and their observers heard of).
    head: int = 0
    #: What its scorer is told of the task: a trial that ends to be scored ends with the
    #: record its scorer is given (`corral._records.record_of`), not built again.
    facts: ScoringFacts | None = None
    #: Model calls and failed tries that no commit has carried yet (None until the
    #: trial's first session: a job is sent to its host without one).
    calls: CallLog | None = None
    #: A rerun whose reopen marker is not written yet: (its sequence number, the status
    #: it reopens). The runtime writes it with the trial's first commit, so a run that
    #: stops before the trial starts leaves its earlier attempt standing (and counted).
    reopen: tuple[int, TrialStatus] | None = None


def reopen_marker(seq: int, status: TrialStatus) -> Commit:
    """The reopen marker of a rerun (`TrialJob.reopen`: its sequence number, the status
    it reopens), made now: written as the trial starts, or with its terminal when it
    ends without starting (unreachable, unreadable)."""
    return Commit(seq, CommitKind.REOPEN, encode(reopen(status)), time.time())


@dataclass(slots=True)
class EvalJob:
    """One evaluation: score the trial and commit it at ``seq``. ``record`` None: the
    place that ran the trial kept its record, or (elsewhere) the store has it."""

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
    #: The terminal it scores, when not the latest attempt's (`EvaluationPayload`).
    terminal_seq: int | None = None


Job = TrialJob | EvalJob


@dataclass(slots=True)
class Executed:
    """Trial (t, r)'s execution ended with ``status``. ``record`` may be None only for a
    status that is evaluated: the place that ran it keeps it for the evaluation."""

    t: int
    r: int
    status: TrialStatus
    output: Any
    #: The sequence number of the trial's next commit (its evaluation's).
    next_seq: int
    record: TrialRecord | None


@dataclass(slots=True)
class Postponed:
    """A rate limit deferred ``job``: it goes on (the same job) after ``deferred.delay``."""

    job: TrialJob
    deferred: Deferred


@dataclass(slots=True)
class Evaluated:
    """Trial (t, r)'s evaluation ended: ``record`` is its final record, ``state`` its
    final state (None: the record's own)."""

    t: int
    r: int
    record: TrialRecord
    state: Any = None


Result = Executed | Postponed | Evaluated
