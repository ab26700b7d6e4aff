"""Trial heads: what a report needs of one trial, kept in the store beside its commits.

A trial's head is its history's one fold (`corral.history.TrialFold`, through
`TrialSummary`) reduced to a row: the latest attempt's status, pass, score, named
scores, error, usage and times. Every backend rewrites a trial's head in the same
transaction as the commits that change it (a terminal, an evaluation, a reopen, or a
kind written after them), so `corral report`, `list`, `compare` and the viewer read
one short row per trial instead of every commit. A store written before heads were
kept has them rebuilt once, on its first writable open (`rebuild_heads`).
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from .._json import dumps
from .._types import NO_USAGE, TrialRecord, Usage
from ..history import CommitKind, finished_and_scored
from ._decode import MAX_TRIALS_PER_TASK, _json, _refuse_constant, corrupt
from ._protocol import TrialSummary

#: Kinds that never change a head once the trial has one: the work before a terminal.
#: A batch of only these leaves heads alone; any other kind (terminal, evaluation,
#: reopen, or a kind this code does not know) refolds the trial.
_WORK_KINDS = frozenset(
    str(k) for k in (CommitKind.SETUP, CommitKind.ACTION, CommitKind.TOOL_EFFECT)
)


def changes_head(kinds: Iterable[str]) -> bool:
    """Whether commits of these kinds change their trial's head."""
    return any(kind not in _WORK_KINDS for kind in kinds)


class TrialHead(NamedTuple):
    """One trial as a report counts it: its latest attempt's outcome and every
    attempt's usage. ``done`` is `finished_and_scored` (what a report and a resume
    count); a trial whose latest attempt has no terminal has ``status`` None."""

    task_id: str
    trial: int
    next_seq: int
    done: bool
    status: str | None = None
    passed: bool = False
    score: float | None = None
    #: Named scores (``Evaluation.scores``) in their order.
    scores: Mapping[str, float] | None = None
    error: str | None = None
    evaluation_error: str | None = None
    attempts: int = 1
    commits: int = 0
    started_at: float | None = 0.0
    finished_at: float | None = None
    usage: Usage = Usage()
    limit: str | None = None
    working_time: float | None = None

    def row(self) -> tuple[Any, ...]:
        """The stored columns after the benchmark id (`HEAD_COLUMNS`)."""
        u = self.usage
        return (
            self.task_id,
            self.trial,
            self.next_seq,
            int(self.done),
            self.status,
            int(self.passed),
            self.score,
            dumps(dict(self.scores)) if self.scores else None,
            self.error,
            self.evaluation_error,
            self.attempts,
            self.commits,
            self.started_at,
            self.finished_at,
            u.input_tokens,
            u.output_tokens,
            u.cost,
            self.limit,
            self.working_time,
        )


#: The stored columns of a head, in `TrialHead.row` order.
HEAD_COLUMNS = (
    "task_id, trial, next_seq, done, status, passed, score, scores, error, "
    "evaluation_error, attempts, commits, started_at, finished_at, input_tokens, "
    "output_tokens, cost, limit_name, working_time"
)


def head_of(summary: TrialSummary) -> TrialHead:
    """The head of the trial ``summary`` folds (the history's one fold)."""
    if summary.terminal is None:
        return TrialHead(
            summary.task_id,
            summary.trial,
            summary.next_seq,
            False,
            commits=summary.commits,
            started_at=summary.started_at,
            usage=summary.usage,
        )
    done = finished_and_scored(summary.terminal, summary.evaluation)
    return head_of_record(summary.record(keep_state=False), summary.next_seq, done)


def head_of_record(record: TrialRecord, next_seq: int, done: bool) -> TrialHead:
    evaluation = record.evaluation
    return TrialHead(
        record.task_id,
        record.trial,
        next_seq,
        done,
        status=str(record.status),
        passed=record.passed,
        score=None if evaluation is None else evaluation.score,
        scores=dict(evaluation.scores) if evaluation is not None and evaluation.scores else None,
        error=record.error,
        evaluation_error=record.evaluation_error,
        attempts=record.attempts,
        commits=record.commits,
        started_at=record.started_at,
        finished_at=record.finished_at,
        usage=record.usage,
        limit=record.limit,
        working_time=record.working_time,
    )


def decode_head(where: str, benchmark_id: str, row: Sequence[Any]) -> TrialHead:
    """A stored head row (`HEAD_COLUMNS`), or `StoreCorrupt` naming what is wrong."""
    try:
        (task_id, trial, next_seq, done, status, passed, score, scores, error, evaluation_error,
         attempts, commits, started_at, finished_at, input_tokens, output_tokens, cost, limit,
         working_time) = row  # fmt: skip
        named = None
        if scores is not None:
            named = _scores(scores)
        if not isinstance(task_id, str) or type(trial) is not int or type(next_seq) is not int:
            raise ValueError("its key is not (text, integer)")
        if type(attempts) is not int or type(commits) is not int:
            raise ValueError("its counts are not integers")
        return TrialHead(
            task_id,
            trial,
            next_seq,
            done == 1,
            status,
            passed == 1,
            _real(score),
            named,
            error,
            evaluation_error,
            attempts,
            commits,
            started_at if started_at is None or type(started_at) is float else float(started_at),
            finished_at
            if finished_at is None or type(finished_at) is float
            else float(finished_at),
            Usage(input_tokens, output_tokens, cost)
            if input_tokens or output_tokens or cost
            else NO_USAGE,
            limit,
            working_time,
        )
    except (ValueError, TypeError) as exc:
        raise corrupt(where, benchmark_id, f"a trial head {list(row[:2])}: {exc}") from None


def _real(value: Any) -> float | None:
    return value if value is None or type(value) is float else float(value)


def _scores(text: Any) -> dict[str, float]:
    value = _json(text)
    if not isinstance(value, dict) or not all(
        type(v) in (int, float) and math.isfinite(v) for v in value.values()
    ):
        raise ValueError("its named scores are not a mapping of numbers")
    return value


class TaskList(NamedTuple):
    """What a report needs of a benchmark's configuration: its trials per task and each
    task's (id, model, environment id), in order."""

    trials_per_task: int
    tasks: list[tuple[str, str | None, str]]


def checked_task_list(trials_per_task: Any, rows: Iterable[Sequence[Any]]) -> TaskList | None:
    """``rows`` of (task id, model, environment id, is an object) as a `TaskList`, the
    model and environment strings shared; None if anything is not as a configuration
    holds it (the caller then reads it whole, which says what is wrong)."""
    if type(trials_per_task) is not int or not 1 <= trials_per_task <= MAX_TRIALS_PER_TASK:
        return None
    shared: dict[str, str] = {}
    tasks = []
    for task_id, model, environment, is_object in rows:
        if not is_object or not isinstance(task_id, str) or not isinstance(environment, str):
            return None
        if model is not None and not isinstance(model, str):
            return None
        model = None if model is None else shared.setdefault(model, model)
        tasks.append((task_id, model, shared.setdefault(environment, environment)))
    return TaskList(trials_per_task, tasks)


class _Meta(NamedTuple):
    """A task's metadata as a report needs it (what `_compact` makes of a task's object)."""

    model: Any
    environment: Any


def _compact(pairs: list[tuple[str, Any]]) -> Any:
    """Each decoded JSON object: a task's (one with an ``environment_id``) as a `_Meta`,
    so that no dict per task outlives its decoding; any other as a dict."""
    found = dict(pairs)
    if "environment_id" in found:
        return _Meta(found.get("model"), found["environment_id"])
    return found


_COMPACT = json.JSONDecoder(object_pairs_hook=_compact, parse_constant=_refuse_constant)


def task_list_of_text(text: Any) -> TaskList | None:
    """`TaskList` of a stored configuration's JSON text, each task's object dropped as
    soon as it is decoded (the whole configuration of 100,000 tasks decoded is a
    hundred MB of dicts); None if the text is not as Corral writes it (the caller
    then decodes it whole, which says what is wrong)."""
    if not isinstance(text, str):
        return None
    try:
        config = _COMPACT.decode(text)
    except (ValueError, RecursionError):
        return None
    tasks = config.get("tasks") if isinstance(config, dict) else None
    if not isinstance(tasks, dict):
        return None
    rows = (
        (task_id, meta.model, meta.environment, True)
        if isinstance(meta, _Meta)
        else (task_id, None, None, False)
        for task_id, meta in tasks.items()
    )
    return checked_task_list(config.get("trials_per_task"), rows)


@runtime_checkable
class HeadStore(Protocol):
    """A store that keeps trial heads (every backend of Corral's does)."""

    def heads(self, benchmark_id: str) -> AsyncIterator[list[TrialHead]]:
        """Every head of the benchmark, in chunks, in (task id, trial) order."""
        ...

    async def task_summaries(self, benchmark_id: str, task_id: str) -> list[TrialSummary]:
        """The summaries of one task's trials (its records, read when shown)."""
        ...

    async def finished_trials(self, benchmark_id: str, trials_per_task: int) -> int:
        """Trials finished as a report counts them (`TrialHead.done`)."""
        ...

    async def task_list(self, benchmark_id: str) -> TaskList | None:
        """What a report needs of the benchmark's configuration, read without decoding
        it whole (None: no such benchmark, or one to read whole)."""
        ...

    def reader(self) -> Any:
        """A store of the same data to read from another thread and event loop (this
        one, if it has no tie to either)."""
        ...


async def heads_of(store: Any, benchmark_id: str) -> AsyncIterator[list[TrialHead]]:
    """``benchmark_id``'s heads: kept by the store, else folded from its `scan`."""
    if isinstance(store, HeadStore):
        async for chunk in store.heads(benchmark_id):
            yield chunk
        return
    async for summaries in store.scan(benchmark_id):
        yield [head_of(s) for s in summaries if s.terminal is not None]


def folded_heads(
    where: str, benchmark_id: str, rows: Iterable[Sequence[Any]], *, finished_only: bool = False
) -> list[TrialHead]:
    """The heads of the trials whose scan rows ``(task_id, trial, seq, kind, payload,
    created_at, input_tokens, output_tokens, cost)`` these are, whole and in key order
    (``finished_only``: of those with a terminal commit since their latest reopen)."""
    from ._summary import RowFolder

    folder = RowFolder(where, benchmark_id)
    summaries = folder.fold(rows) + folder.rest()
    return [head_of(s) for s in summaries if not finished_only or s.terminal is not None]


class RebuildProgress:
    """The progress line of a store's one rebuild of its heads, on stderr."""

    EVERY = 50_000

    def __init__(self, where: str) -> None:
        self.where = where
        self.trials = 0
        self._started = time.monotonic()
        self._said = 0
        self._say("building trial summaries (once, for this version of Corral)")

    def add(self, trials: int) -> None:
        self.trials += trials
        if self.trials - self._said >= self.EVERY:
            self._said = self.trials
            self._say(f"{self.trials:,} trials summarised")

    def done(self) -> None:
        seconds = time.monotonic() - self._started
        self._say(f"{self.trials:,} trials summarised in {seconds:.1f} s")

    def _say(self, text: str) -> None:
        print(f"corral: {self.where}: {text}", file=sys.stderr, flush=True)
