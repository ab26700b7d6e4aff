"""Trial records from terminal and evaluation commits: the one place that reads them."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

from . import history
from ._types import (
    NO_USAGE,
    UNCHANGED,
    BenchmarkTaskMetadata,
    Commit,
    Evaluation,
    TrialRecord,
    Usage,
    slot_builder,
)

_NO_DETAILS: Mapping[str, Any] = MappingProxyType({})

#: ``TrialRecord(*values)``, every field given in order (one missing raises), the same
#: object (`slot_builder`: two records a trial, each in a seventh of what the frozen
#: ``__init__`` costs).
_record: Callable[..., TrialRecord] = slot_builder(TrialRecord)


def evaluation_of(commit: Commit) -> Evaluation | None:
    """The `Evaluation` an evaluation commit records, or None if scoring failed."""
    return history.evaluation_of(commit).evaluation


def record_of(
    task_id: str,
    trial: int,
    *,
    terminal: Commit,
    evaluation: Commit | None,
    commits: int,
    started_at: float,
    usage: Usage,
    keep_state: bool = True,
    ended: history.TerminalPayload | None = None,
    facts: ScoringFacts | None = None,
) -> TrialRecord:
    """The record of a trial that ended with ``terminal`` (``ended``: its payload, if the
    caller has it, whose stamp need not be filled in) and, if given, was scored by
    ``evaluation``. With ``facts``, the record its scorer is given (`for_scorer`),
    built at once: the runtime builds it so when the trial is to be scored. ``usage``:
    the trial's, an ``evaluation``'s included."""
    payload = history.terminal_of(terminal) if ended is None else ended
    state = payload.state
    meta = None
    if facts is not None:
        task_id, meta = facts
    record = _record(  # TrialRecord's fields in order
        task_id,
        trial,
        payload.status,
        payload.output,
        None,  # evaluation
        payload.error,
        payload.attempts,
        commits - (evaluation is not None),
        started_at,
        terminal.created_at,  # finished_at
        usage,
        None if not keep_state or state is UNCHANGED else state,
        payload.traceback,
        None,  # evaluation_error
        payload.limit,
        history.worked_of(terminal),  # working_time
        None if meta is None else task_id,  # task
        None if meta is None else meta.model,
        None if meta is None else meta.environment_id,
        _NO_DETAILS if meta is None else meta.inputs,
        None if meta is None else meta.target,
        _NO_DETAILS if meta is None else meta.metadata,
        history.model_calls_of(terminal),
    )
    # ``usage`` is the trial's whole (folded from its commits, the evaluation's too).
    return record if evaluation is None else with_evaluation(record, evaluation, counted=True)


def with_evaluation(
    record: TrialRecord,
    commit: Commit,
    scored: history.EvaluationPayload | None = None,
    *,
    task_id: str | None = None,
    keep_state: bool = True,
    share: Callable[..., Evaluation] | None = None,
    counted: bool = False,
) -> TrialRecord:
    """``record`` once its evaluation commit exists (``scored``: its payload, if the
    caller has it), without what its scorer was told of the task: ``task_id`` its
    own id (``record``'s if None), its state kept or not, and its `Evaluation` made by
    ``share`` if given (`TrialTable.evaluation`: one kept already, so the report keeps
    this record as it is). ``counted``: ``record``'s usage counts the commit's already
    (a trial's usage folded from all its commits)."""
    payload = history.evaluation_of(commit) if scored is None else scored
    if share is not None and payload.passed is not None:
        evaluation: Evaluation | None = share(
            payload.score, payload.passed, payload.details or _NO_DETAILS,
            payload.scores or _NO_DETAILS,
        )  # fmt: skip
    else:
        evaluation = payload.evaluation
    error, evaluation_error, trace = record.error, None, record.traceback
    if evaluation is None:
        evaluation_error = str(payload.error)
        error = f"evaluation failed: {evaluation_error}"
        trace = payload.traceback
    usage, spent = record.usage, commit.usage
    # Most scorers spend nothing: NO_USAGE, told apart without a call of its ``__bool__``.
    if not counted and spent is not NO_USAGE and spent:
        usage = usage + spent
    return _rebuilt(
        record,
        evaluation,
        error,
        record.commits + 1,
        commit.created_at,
        usage,
        record.state if keep_state else None,
        trace,
        evaluation_error,
        task_id=task_id,
        # Its graders' calls (a model-graded scorer's) are the trial's too.
        model_calls=history.with_scorer_calls(record.model_calls, payload),
    )


def without_state(record: TrialRecord, evaluation: Evaluation | None = None) -> TrialRecord:
    """``record`` without its final state (a report keeps no states), with
    ``evaluation`` (an equal one) in place of its own if given."""
    if record.state is None and evaluation is None and record.task is None:
        return record
    return _rebuilt(
        record,
        record.evaluation if evaluation is None else evaluation,
        record.error,
        record.commits,
        record.finished_at,
        record.usage,
        None,
        record.traceback,
        record.evaluation_error,
        model_calls=record.model_calls,
    )


def _rebuilt(
    record: TrialRecord,
    evaluation: Evaluation | None,
    error: str | None,
    commits: int,
    finished_at: float | None,
    usage: Usage,
    state: Any,
    traceback: str | None,
    evaluation_error: str | None,
    facts: ScoringFacts | None = None,
    *,
    model_calls: Mapping[str, history.CallCounts] | None,
    task_id: str | None = None,
) -> TrialRecord:
    """``record`` with these values (its ``model_calls`` too), the others its own (and,
    with ``facts``, what its scorer is told of the task: see `for_scorer`). The one
    copy of a record (a record is frozen; `dataclasses.replace` costs several times
    more per trial)."""
    task, meta = None, None
    if task_id is None:
        task_id = record.task_id
    if facts is not None:
        task_id = task = facts[0]
        meta = facts[1]
    return _record(  # TrialRecord's fields in order
        task_id,
        record.trial,
        record.status,
        record.output,
        evaluation,
        error,
        record.attempts,
        commits,
        record.started_at,
        finished_at,
        usage,
        state,
        traceback,
        evaluation_error,
        record.limit,
        record.working_time,
        task,
        None if meta is None else meta.model,
        None if meta is None else meta.environment_id,
        _NO_DETAILS if meta is None else meta.inputs,
        None if meta is None else meta.target,
        _NO_DETAILS if meta is None else meta.metadata,
        model_calls,
    )


_SHARED_EVALUATIONS = 256


def _sharing_key(
    score: Any, passed: bool, details: Mapping[str, Any], scores: Mapping[str, float] = _NO_DETAILS
) -> tuple[Any, ...] | None:
    """What equal evaluations without details share (None: this one is kept apart)."""
    # 1 and 1.0, or 0.0 and -0.0, are different JSON: the type and sign are kept.
    if details or not _plain(score):
        return None
    if not scores:
        return (type(score), score, passed)
    # Named scores in their order (JSON keeps it), each with its type.
    named = []
    for name, value in scores.items():
        if not _plain(value):
            return None
        named.append((name, type(value), value))
    return (type(score), score, passed, tuple(named))


def _plain(value: Any) -> bool:
    return type(value) in (int, float) and not (value == 0 and math.copysign(1.0, value) < 0)


class TrialTable(Mapping[tuple[str, int], TrialRecord]):
    """Finished trials' records by (task id, trial): one list per task, no key per trial.

    A task's list grows to its highest trial added, so memory follows the records,
    never ``trials_per_task`` alone (a stored one may be damaged)."""

    def __init__(self, trials_per_task: int) -> None:
        self._n = trials_per_task
        self._tasks: dict[str, list[TrialRecord | None]] = {}
        self._count = 0
        # Evaluations without details, by (score type, score, passed): most trials of a
        # run share a handful (an `Evaluation` is frozen). Bounded, as scores may vary.
        self._evaluations: dict[tuple[Any, ...], Evaluation] = {}
        #: The ids of those kept (kept for the table's life: an id names one object).
        self._kept: set[int] = set()

    def add(self, record: TrialRecord) -> None:
        """Keep ``record`` as a report needs it: without its state, and sharing an
        equal evaluation already kept."""
        record = without_state(record, self._shared(record.evaluation))
        trial = record.trial
        if not 0 <= trial < self._n:
            raise IndexError(f"trial {trial} of {record.task_id!r} is outside 0..{self._n - 1}")
        row = self._tasks.get(record.task_id)
        if row is None:
            row = self._tasks[record.task_id] = []
        if trial >= len(row):
            row.extend([None] * (trial + 1 - len(row)))
        if row[trial] is None:
            self._count += 1
        row[trial] = record

    def _shared(self, evaluation: Evaluation | None) -> Evaluation | None:
        """An equal evaluation kept earlier, or None to keep this one."""
        if evaluation is None or id(evaluation) in self._kept:  # one kept already
            return None
        key = _sharing_key(
            evaluation.score, evaluation.passed, evaluation.details, evaluation.scores
        )
        if key is None:
            return None
        kept = self._evaluations.get(key)
        if kept is None:
            self._keep(key, evaluation)
        return None if kept is evaluation else kept

    def _keep(self, key: tuple[Any, ...], evaluation: Evaluation) -> None:
        """Share ``evaluation`` from now on with the equal ones to come, if there is room."""
        if len(self._evaluations) < _SHARED_EVALUATIONS:
            self._evaluations[key] = evaluation
            self._kept.add(id(evaluation))

    def evaluation(
        self,
        score: float,
        passed: bool,
        details: Mapping[str, Any],
        scores: Mapping[str, float] = _NO_DETAILS,
        usage: Usage = NO_USAGE,
        model_calls: tuple[Any, ...] = (),
    ) -> Evaluation:
        """An `Evaluation` of these values: one kept already if there is one (so `add`
        keeps a record that has it as it is). Safe from another thread: at worst, equal
        evaluations end up kept twice."""
        # Most spend nothing: NO_USAGE, told apart without a call of its ``__bool__``.
        spent = usage is not NO_USAGE and usage
        # Named scores are a dict, the trial's own: its record is handed on (a reflective
        # session is shown it), and an edit to a shared one would be every trial's.
        kept_apart = spent or model_calls or scores
        key = None if kept_apart else _sharing_key(score, passed, details)
        kept = None if key is None else self._evaluations.get(key)
        if kept is None:
            kept = Evaluation(score, passed, details, scores, usage, model_calls)
            if key is not None:
                # Kept for the next equal one: a run whose records are spooled (most)
                # never `add`s one here, and would make one a trial.
                self._keep(key, kept)
        return kept

    def remove(self, task_id: str, trial: int) -> None:
        """Forget a trial's record (it was reopened for a fresh attempt)."""
        row = self._tasks.get(task_id)
        if row is not None and 0 <= trial < len(row) and row[trial] is not None:
            row[trial] = None
            self._count -= 1

    def clear(self) -> None:
        """Forget every record (the evaluations kept for sharing stay)."""
        self._tasks.clear()
        self._count = 0

    def trials(self, task_id: str) -> list[TrialRecord]:
        """``task_id``'s records in trial order: the table's own row (not a copy)
        when every trial finished, so a report built at the end of a run shares it."""
        row = self._tasks.get(task_id)
        if row is None:
            return []
        if len(row) < self._n or None in row:
            return [record for record in row if record is not None]
        return row  # type: ignore[return-value]  # no None left

    def __getitem__(self, key: tuple[str, int]) -> TrialRecord:
        row = self._tasks.get(key[0])
        record = row[key[1]] if row is not None and 0 <= key[1] < len(row) else None
        if record is None:
            raise KeyError(key)
        return record

    def __iter__(self) -> Iterator[tuple[str, int]]:
        for task_id, row in self._tasks.items():
            for trial, record in enumerate(row):
                if record is not None:
                    yield (task_id, trial)

    def __len__(self) -> int:
        return self._count


#: What the scorer is told of a trial's task beside the record itself: the task id as
#: written (no ``@model``) and the task's metadata (a plain pair: one per evaluation).
ScoringFacts = tuple[str, BenchmarkTaskMetadata]


def scoring_facts(task: str, meta: BenchmarkTaskMetadata) -> ScoringFacts:
    """``meta``'s facts for its scorer; ``task`` is the id as written (no ``@model``)."""
    return (task, meta)


def for_scorer(record: TrialRecord, facts: ScoringFacts | None) -> TrialRecord:
    """The record ``evaluate`` is given: ``record`` with its task's facts, and its
    ``task_id`` the id as written (a several-models run's ``add@gpt-x`` is ``add``,
    with ``model`` saying which). A record built with its facts (`record_of`) is its own."""
    if facts is None or record.task is not None:
        return record
    return _rebuilt(
        record,
        record.evaluation,
        record.error,
        record.commits,
        record.finished_at,
        record.usage,
        record.state,
        record.traceback,
        record.evaluation_error,
        facts,
        model_calls=record.model_calls,
    )
