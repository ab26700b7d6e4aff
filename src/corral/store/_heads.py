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

import math
import re
import sys
import time
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from .._json import dumps
from .._types import TrialRecord, Usage
from ..history import CommitKind, finished_and_scored
from ._decode import _DECODER, MAX_TRIALS_PER_TASK, _json, corrupt
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


@dataclass(frozen=True, slots=True)
class TrialHead:
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
        return TrialHead(
            task_id,
            trial,
            next_seq,
            bool(done),
            status,
            bool(passed),
            None if score is None else float(score),
            named,
            error,
            evaluation_error,
            int(attempts),
            int(commits),
            None if started_at is None else float(started_at),
            None if finished_at is None else float(finished_at),
            Usage(int(input_tokens), int(output_tokens), float(cost)),
            limit,
            None if working_time is None else float(working_time),
        )
    except (ValueError, TypeError) as exc:
        raise corrupt(where, benchmark_id, f"a trial head {list(row[:2])}: {exc}") from None


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


_SPACE = re.compile(r"[ \t\n\r]*")


def task_list_of_text(text: Any) -> TaskList | None:
    """`TaskList` of a stored configuration's JSON text, read one task at a time (the
    whole configuration of 100,000 tasks decoded is a hundred MB of dicts); None if
    the text is not as Corral writes it (the caller then decodes it whole, which says
    what is wrong)."""
    if not isinstance(text, str):
        return None
    trials: Any = None
    rows: list[tuple[Any, Any, Any, bool]] | None = None
    try:
        at = _open(text, 0)
        while at is not None:
            key, at = _key(text, at)
            if key == "tasks" and text[at] == "{":
                rows = []
                inner = _open(text, at)
                end = _SPACE.match(text, at + 1).end() + 1  # type: ignore[union-attr]  # if empty
                while inner is not None:
                    task_id, inner = _key(text, inner)
                    meta, inner = _DECODER.raw_decode(text, inner)
                    if isinstance(meta, dict):
                        model, environment = meta.get("model"), meta.get("environment_id")
                        rows.append((task_id, model, environment, True))
                    else:
                        rows.append((task_id, None, None, False))
                    inner, end = _next(text, inner)
                at = end
            else:
                value, at = _DECODER.raw_decode(text, at)
                if key == "trials_per_task":
                    trials = value
            at, last = _next(text, at)
        if text[last:].strip():
            return None
    except (ValueError, IndexError, RecursionError, UnboundLocalError):
        return None
    if rows is None or len({row[0] for row in rows}) != len(rows):
        return None  # no tasks, or a repeated task id (decoded whole, the last counts)
    return checked_task_list(trials, rows)


def _open(text: str, at: int) -> int | None:
    """Past the ``{`` at ``at``: where its first member starts (None: it is empty)."""
    if text[at] != "{":
        raise ValueError("not an object")
    at = _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]  # always matches
    return None if text[at] == "}" else at


def _key(text: str, at: int) -> tuple[str, int]:
    """A member's key at ``at``, and where its value starts."""
    key, at = _DECODER.raw_decode(text, at)
    if not isinstance(key, str):
        raise ValueError("a key that is not a string")
    at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
    if text[at] != ":":
        raise ValueError("no colon")
    return key, _SPACE.match(text, at + 1).end()  # type: ignore[union-attr]


def _next(text: str, at: int) -> tuple[int | None, int]:
    """After a member's value: where the next member starts (None: the object ended),
    and where the object ends (past its ``}``)."""
    at = _SPACE.match(text, at).end()  # type: ignore[union-attr]
    if text[at] == ",":
        return _SPACE.match(text, at + 1).end(), at  # type: ignore[union-attr]
    if text[at] == "}":
        return None, at + 1
    raise ValueError("neither a comma nor the object's end")


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
