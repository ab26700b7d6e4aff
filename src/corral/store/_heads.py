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

import codecs
import math
import sys
import time
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any, NamedTuple, Protocol, runtime_checkable

from .. import history
from .._json import dumps
from .._types import EVALUATED_STATUSES, NO_USAGE, Commit, TrialKey, TrialStatus, Usage
from ..history import (
    CallCounts,
    CommitKind,
    ConfigStream,
    StoredConfigText,
)
from ..history._codec import calls_from_json, calls_json
from ._decode import LATEST, MAX_TRIALS_PER_TASK, _json, corrupt
from ._protocol import TrialSummary
from ._summary import RowFolder

#: Kinds that never change a head once the trial has one: the work before a terminal.
#: A batch of only these leaves heads alone; any other kind (terminal, evaluation,
#: reopen, a model call or ``usage`` commit a cancelled run landed, whose usage the
#: head counts, or a kind this code does not know) refolds the trial.
_WORK_KINDS = frozenset(
    str(k) for k in (CommitKind.SETUP, CommitKind.ACTION, CommitKind.TOOL_EFFECT)
)


#: The largest integer a head's token columns hold (SQLite INTEGER, PostgreSQL bigint).
_INT64 = 2**63 - 1


def changes_head(kinds: Iterable[str]) -> bool:
    """Whether commits of these kinds change their trial's head."""
    return any(kind not in _WORK_KINDS for kind in kinds)


class TrialHead(NamedTuple):
    """One trial as a report counts it: its latest attempt's outcome and every
    attempt's usage. ``done`` is `finished_and_scored` (what a report counts) of the
    attempt a report counts (`TrialSummary.counted`: a rerun's earlier one until the
    new one ends, with the usage of the attempts before the reopen, as made at it); a
    trial with no such attempt has ``status`` None."""

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
    #: Every attempt's model calls counted per model, as its terminal counts them
    #: (`corral.history.model_calls_of`, what `TrialRecord.model_calls` holds).
    model_calls: Mapping[str, CallCounts] | None = None

    def row(self, null: Any = None) -> tuple[Any, ...]:
        """The stored columns after the benchmark id (`HEAD_COLUMNS`); a real column
        always a float (PostgreSQL gets a batch's heads as one typed array a column), a
        token total at most what a 64-bit column holds (`_INT64`: each step records at
        most that many, but a trial's sum of them may pass it; its commits keep every
        step's exact count). ``null`` stands for each missing value: the SQLite store's
        writer gives NaN (`sqlite.NULL`). Written out, with no call a column: the
        writer thread makes a row for every trial a batch finishes, holding the GIL."""
        (task_id, trial, next_seq, done, status, passed, score, scores, error, evaluation_error,
         attempts, commits, started, finished, usage, limit, worked, calls) = self  # fmt: skip
        inputs, outputs = usage.input_tokens, usage.output_tokens
        return (
            task_id,
            trial,
            next_seq,
            1 if done else 0,
            null if status is None else status,
            1 if passed else 0,
            null if score is None else score if type(score) is float else float(score),
            dumps(dict(scores)) if scores else null,
            null if error is None else error,
            null if evaluation_error is None else evaluation_error,
            attempts,
            commits,
            null if started is None else started if type(started) is float else float(started),
            null if finished is None else finished if type(finished) is float else float(finished),
            inputs if inputs <= _INT64 else _INT64,
            outputs if outputs <= _INT64 else _INT64,
            float(usage.cost),
            null if limit is None else limit,
            null if worked is None else worked if type(worked) is float else float(worked),
            null if calls is None else dumps(calls_json(calls)),
        )


#: The stored columns of a head, in `TrialHead.row` order.
HEAD_COLUMNS = (
    "task_id, trial, next_seq, done, status, passed, score, scores, error, "
    "evaluation_error, attempts, commits, started_at, finished_at, input_tokens, "
    "output_tokens, cost, limit_name, working_time, model_calls"
)


def head_of(summary: TrialSummary) -> TrialHead:
    """The head of the trial ``summary`` folds (the history's one fold): of the attempt
    a report counts (`TrialSummary.counted`). A terminal or evaluation whose payload
    cannot be read gives a head that is not done: writing a head never fails an append
    (a report from the commits cannot count it either)."""
    summary = summary.counted()
    return _head(
        summary.task_id,
        summary.trial,
        summary.next_seq,
        summary.commits,
        summary.started_at,
        summary.usage,
        summary.terminal,
        summary.evaluation,
    )


def _head(
    task_id: str,
    trial: int,
    next_seq: int,
    commits: int,
    started_at: float,
    usage: Usage,
    terminal: Commit | None,
    evaluation: Commit | None,
) -> TrialHead:
    """`head_of` from the fields of a summary (the writer's folds make no summary)."""
    if terminal is None:
        return TrialHead(
            task_id, trial, next_seq, False, commits=commits, started_at=started_at, usage=usage
        )
    try:
        return _ended_head(
            task_id, trial, next_seq, commits, started_at, usage, terminal, evaluation
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        return TrialHead(task_id, trial, next_seq, False)


def _ended_head(*fields: Any) -> TrialHead:
    """`_head` of a trial with a terminal (raises what an unreadable payload raises)."""
    task_id, trial, next_seq, commits, started_at, usage, terminal, evaluation = fields
    # The record's figures (`corral._records.record_of`), read from the payloads
    # without making a record: this runs for every trial a batch finishes.
    # The terminal's fields a head holds, read as `history.terminal_of` reads them
    # (an unknown status raises as it does) without decoding the rest twice.
    status, error, attempts, limit, worked, calls = history.ended_fields_of(terminal)
    evaluation_error = None
    score: float | None = None
    scores: Mapping[str, float] | None = None
    passed = False
    finished_at = terminal.created_at
    if evaluation is not None:
        scored_passed, scored_score, scored_scores, scored_error = history.scored_fields_of(
            evaluation
        )
        finished_at = evaluation.created_at  # ``usage`` (the fold's) counts its usage
        if scored_passed is None:  # the scorer failed
            evaluation_error = str(scored_error)
            error = f"evaluation failed: {evaluation_error}"
        else:
            score = scored_score
            scores = dict(scored_scores) if scored_scores else None
            passed = bool(scored_passed) and status != "limit"
        if type(evaluation.payload) is dict and _GRADER_CALLS in evaluation.payload:
            # Its graders' calls (a model-graded scorer's) are the trial's too.
            calls = history.with_scorer_calls(calls, history.evaluation_of(evaluation))
    # Every field, so the tuple is made directly (`_new_head`): the writer thread makes
    # one for every trial a batch finishes, holding the GIL.
    return _new_head(
        TrialHead,
        (
            task_id,
            trial,
            next_seq,
            evaluation is not None or status not in EVALUATED_STATUSES,
            status,
            passed,
            score,
            scores,
            error,
            evaluation_error,
            attempts,
            commits,
            started_at,
            finished_at,
            usage,
            limit,
            worked,
            calls,
        ),
    )


#: The key of an evaluation's payload that holds its graders' calls.
_GRADER_CALLS = history.MODEL_CALLS


def decode_head(where: str, benchmark_id: str, row: Sequence[Any]) -> TrialHead:
    """A stored head row (`HEAD_COLUMNS`), or `StoreCorrupt` naming what is wrong."""
    try:
        (task_id, trial, next_seq, done, status, passed, score, scores, error, evaluation_error,
         attempts, commits, started_at, finished_at, input_tokens, output_tokens, cost, limit,
         working_time, calls) = row  # fmt: skip
        named = None
        if scores is not None:
            named = _scores(scores)
        if not isinstance(task_id, str) or type(trial) is not int or type(next_seq) is not int:
            raise ValueError("its key is not (text, integer)")
        if type(attempts) is not int or type(commits) is not int:
            raise ValueError("its counts are not integers")
        if not 0 <= trial < MAX_TRIALS_PER_TASK:
            raise ValueError(f"its trial {trial!r} is not in 0..{MAX_TRIALS_PER_TASK - 1:,}")
        if next_seq < 0:
            raise ValueError(f"its next sequence number {next_seq!r} is negative")
        if done not in (0, 1) or passed not in (0, 1):
            raise ValueError(f"its done {done!r} or passed {passed!r} is not 0 or 1")
        if status is not None and status not in _STATUSES:
            raise ValueError(f"its status {status!r} is none of {', '.join(sorted(_STATUSES))}")
        if done and status is None:  # a report counts a finished trial by its status
            raise ValueError("it is done but has no status")
        if attempts < 0 or commits < 0:
            raise ValueError("its counts are negative")
        if working_time is not None and type(working_time) not in (int, float):
            raise ValueError(f"its working time {working_time!r} is not a number")
        if not (
            type(input_tokens) is int
            and type(output_tokens) is int
            and type(cost) in (int, float)
            and input_tokens >= 0
            and output_tokens >= 0
            and cost >= 0
        ):
            raise ValueError(
                f"its usage ({input_tokens!r}, {output_tokens!r}, {cost!r}) is not "
                "non-negative numbers"
            )
        # The tuple made directly: a head is read per trial of a report (100,000 of
        # them), and the named tuple's own constructor costs a third of the read.
        return _new_head(
            TrialHead,
            (
                task_id,
                trial,
                next_seq,
                done == 1,
                status,
                passed == 1,
                score if score is None or type(score) is float else float(score),
                named,
                error,
                evaluation_error,
                attempts,
                commits,
                started_at
                if started_at is None or type(started_at) is float
                else float(started_at),
                finished_at
                if finished_at is None or type(finished_at) is float
                else float(finished_at),
                Usage(input_tokens, output_tokens, cost)
                if input_tokens or output_tokens or cost
                else NO_USAGE,
                limit,
                working_time,
                None if calls is None else _calls(calls),
            ),
        )
    except (ValueError, TypeError) as exc:
        raise corrupt(where, benchmark_id, f"a trial head {list(row[:2])}: {exc}") from None


_new_head = tuple.__new__
_STATUSES = frozenset(str(s) for s in TrialStatus)


def _calls(text: Any) -> dict[str, CallCounts]:
    value = _json(text)
    if not isinstance(value, dict):
        raise ValueError("its model calls are not a mapping")
    return calls_from_json(value) or {}


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
    #: A list, or (a run's own report) a sequence over the run's plan.
    tasks: Sequence[tuple[str, str | None, str]]


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


def task_list_of_pieces(pieces: Iterable[str]) -> TaskList | None:
    """`TaskList` of a stored configuration's JSON text given in pieces, read a task at
    a time (`StoredConfigText`): no piece but the one at hand, nor any task's entry,
    is kept (the configuration of 100,000 tasks decoded whole is a hundred MB of
    dicts). None if the text is not as Corral writes it, or not JSON, or has a key
    twice, or its trials per task after its tasks: the caller then decodes it whole,
    which says what is wrong."""
    read = StoredConfigText(pieces)
    entries = read.tasks()
    try:
        first = next(entries, None)  # the keys before the tasks are read by now
        trials = read.header.get("trials_per_task")
        found = checked_task_list(trials, _task_rows(first, entries))
        header = read.header  # whole now: every task was read
    except (ValueError, RecursionError):
        return None
    if (
        found is None
        or not read.has_tasks
        or "tasks" in header  # a second, not an object: a whole decode keeps that one
        or "environment_id" in header  # a whole decode would not see its tasks
        or header.get("trials_per_task") is not trials  # another value after the tasks
    ):
        return None
    return found


def _task_rows(
    first: tuple[str, Any] | None, entries: Iterator[tuple[str, Any]]
) -> Iterator[tuple[str, Any, Any, bool]]:
    """`checked_task_list` rows of a configuration's task entries; a `ValueError` where
    one is not as Corral writes it, or is there twice (a whole decode keeps the last)."""
    if first is None:
        return
    seen: set[str] = set()
    for task_id, task in chain((first,), entries):
        if task_id in seen:
            raise ValueError("a task twice")
        seen.add(task_id)
        if type(task) is not dict or "environment_id" not in task:
            raise ValueError("a task is not an object with an environment")
        yield task_id, task.get("model"), task["environment_id"], True


#: Bytes of a stored configuration read at a time (`task_list_of_pieces`).
CONFIG_PIECE = 1 << 20


def utf8_pieces(pieces: Iterable[bytes]) -> Iterator[str]:
    """UTF-8 ``pieces`` as text (a character may be split between two); a
    `UnicodeDecodeError` (a `ValueError`) where they are not UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    for piece in pieces:
        yield decoder.decode(piece)
    yield decoder.decode(b"", final=True)


def task_list_of_text(text: Any) -> TaskList | None:
    """`TaskList` of a stored configuration's JSON text (`task_list_of_pieces`)."""
    return task_list_of_pieces((text,)) if isinstance(text, str) else None


def task_list_of_config(config: Mapping[str, Any]) -> TaskList | None:
    """`TaskList` of a configuration already decoded (None: not as Corral writes it)."""
    tasks = config.get("tasks")
    if not isinstance(tasks, Mapping):
        return None
    rows = (
        (task_id, task.get("model"), task.get("environment_id"), True)
        if isinstance(task, Mapping)
        else (task_id, None, None, False)
        for task_id, task in tasks.items()
    )
    return checked_task_list(config.get("trials_per_task"), rows)


class BenchmarkOverview(NamedTuple):
    """A benchmark as ``corral list`` shows it, read without decoding its configuration."""

    benchmark_id: str
    created_at: float
    tasks: int
    trials_per_task: int


def checked_overview(rows: Iterable[Sequence[Any]]) -> list[BenchmarkOverview] | None:
    """Rows of (id, created at, trials per task, task count, any task amiss) as
    overviews; None if any is not as Corral writes it (the caller reads the
    benchmarks whole instead, which says what is wrong)."""
    out = []
    for benchmark_id, created_at, trials, tasks, amiss in rows:
        if isinstance(trials, str) and trials.isdigit():
            trials = int(trials)
        if (
            not isinstance(benchmark_id, str)
            or amiss
            or type(created_at) is not float
            or not 0 <= created_at < LATEST
            or type(trials) is not int
            or not 1 <= trials <= MAX_TRIALS_PER_TASK
            or type(tasks) is not int
        ):
            return None
        out.append(BenchmarkOverview(benchmark_id, created_at, tasks, trials))
    return out


class CountedConfig:
    """A configuration's text (`ConfigStream.text`) with what ``corral list`` shows of
    it counted as it is written: `overview` is (trials per task, tasks) when every
    task is as Corral writes it (an object whose environment is a string, whose model
    is a string or null), else None (the overview is then read from the text)."""

    def __init__(self, config: ConfigStream) -> None:
        self._config = config
        self._tasks = 0
        self._sound = True

    def text(self) -> Iterator[str]:
        config = self._config
        whole = config.whole
        if whole is None:
            return config.text(self._count)
        tasks = whole.get("tasks")
        if isinstance(tasks, Mapping):
            self._count(list(tasks.items()))
        else:
            self._sound = False
        return config.text()

    def _count(self, entries: list[tuple[str, Any]]) -> None:
        """Count a batch of entries, and whether each is as Corral writes it (a plain
        dict, the common case, needs no ABC check)."""
        self._tasks += len(entries)
        if self._sound:
            self._sound = all(
                (type(task) is dict or isinstance(task, Mapping))
                and type(task.get("environment_id")) is str
                and (task.get("model") is None or type(task.get("model")) is str)
                for _, task in entries
            )

    @property
    def overview(self) -> tuple[int, int] | None:
        config = self._config
        trials = (
            config.trials_per_task if config.whole is None else config.whole.get("trials_per_task")
        )
        if not self._sound or type(trials) is not int or not 1 <= trials <= MAX_TRIALS_PER_TASK:
            return None
        return trials, self._tasks


@runtime_checkable
class HeadStore(Protocol):
    """A store that keeps trial heads (every backend of Corral's does)."""

    def heads(self, benchmark_id: str) -> AsyncIterator[list[TrialHead]]:
        """Every head of the benchmark, in chunks, in (task id, trial) order."""
        ...

    async def task_summaries(
        self, benchmark_id: str, task_ids: Sequence[str]
    ) -> list[TrialSummary]:
        """The summaries of these tasks' trials (their records, read when used), in
        (task id, trial) order."""
        ...

    async def checked_history(self, key: TrialKey) -> list[Commit]:
        """``key``'s `history`, checked against its head, read first (`check_head_met`):
        what shows a trial's commits beside its head (`corral show`, the viewer's trial
        page beside its row) says a store whose commits were deleted is corrupt."""
        ...

    async def finished_trials(self, benchmark_id: str, trials_per_task: int) -> int:
        """Trials finished as a report counts them (`TrialHead.done`)."""
        ...

    async def heads_written(self, benchmark_id: str) -> int:
        """The sum of the heads' next sequence numbers: it grows whenever a head is
        written again, a rerun's reopen marker and its end included, which change no
        count of `finished_trials` (a report counts the earlier attempt meanwhile)."""
        ...

    async def task_list(self, benchmark_id: str) -> TaskList | None:
        """What a report needs of the benchmark's configuration, read without decoding
        it whole (None: no such benchmark, or one to read whole)."""
        ...

    async def overview(self) -> list[BenchmarkOverview] | None:
        """Every benchmark, oldest first, without decoding configurations (None: read
        them whole instead, which says what is wrong with one)."""
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
        yield headed(summaries)


async def sum_written(chunks: AsyncIterator[list[TrialHead]]) -> int:
    """`HeadStore.heads_written` of these heads."""
    return sum([sum(h.next_seq for h in chunk) async for chunk in chunks])


async def count_done(chunks: AsyncIterator[list[TrialHead]], trials_per_task: int) -> int:
    """How many of these heads are done, of a trial below ``trials_per_task``."""
    found = 0
    async for chunk in chunks:
        found += sum(1 for h in chunk if h.done and h.trial < trials_per_task)
    return found


def folded_heads(
    where: str, benchmark_id: str, rows: Iterable[Sequence[Any]], *, finished_only: bool = False
) -> list[TrialHead]:
    """The heads of the trials whose scan rows ``(task_id, trial, seq, kind, payload,
    created_at, input_tokens, output_tokens, cost)`` these are, whole and in key order
    (``finished_only``: of those with an attempt to count, `headed`)."""
    folder = RowFolder(where, benchmark_id)
    summaries = folder.fold(rows) + folder.rest()
    return headed(summaries) if finished_only else [head_of(s) for s in summaries]


def headed(summaries: Iterable[TrialSummary]) -> list[TrialHead]:
    """The heads of the trials that have an attempt to count (a terminal commit since
    their latest reopen, or before it: `TrialSummary.counted`)."""
    return [head_of(s) for s in summaries if s.terminal is not None or s.standing is not None]


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


class _HeadFold:
    """A trial's fold as far as its head reads it: `TrialFold.apply` less the failed
    attempts and model calls a head never reads (the model calls it holds are its
    terminal's, `history.model_calls_of`, and its evaluation's graders'). The latest
    attempt's commits are counted from their sequence numbers (``last_seq - first_seq +
    1``: a trial's seqs have no gaps, which `OpenFolds.heads` checks), so a commit of
    work costs a kind test and a usage test. `OpenFolds.heads` applies each commit."""

    __slots__ = ("last_seq", "first_seq", "started_at", "usage", "earlier_usage",
                 "terminal", "evaluation")  # fmt: skip

    def __init__(self, started_at: float) -> None:
        self.last_seq = -1
        #: The latest attempt's first commit (0, or its reopen marker's).
        self.first_seq = 0
        self.started_at = started_at
        self.usage: Usage = NO_USAGE
        self.earlier_usage: Usage = NO_USAGE
        self.terminal: Commit | None = None
        self.evaluation: Commit | None = None


_REOPEN = str(CommitKind.REOPEN)
_TERMINAL = str(CommitKind.TERMINAL)
_EVALUATION = str(CommitKind.EVALUATION)


class OpenFolds:
    """The writer's folds of the trials it is writing (the history's one fold, applied
    to each commit as its batch is written), so a head is made from the commits in
    hand rather than read back: a trial's fold is kept from its first commit until its
    head is done, and any gap (a trial resumed from an earlier run, another process's
    append, a failed batch) falls back to refolding the trial from the store.

    A terminal whose status is scored writes no head: until its evaluation lands, the
    trial's head stays as its last one (none, or a rerun's earlier attempt: a reopen
    after an attempt that ended refolds the trial), which is what a report counts
    either way.
    """

    def __init__(self) -> None:
        self._folds: dict[Any, _HeadFold] = {}

    def clear(self) -> None:
        """Forget every fold (a batch failed: what it applied may not have landed)."""
        self._folds.clear()

    def heads(self, key: Any, commits: Sequence[Commit]) -> tuple[bool, TrialHead | None]:
        """(known, head) once ``commits`` of ``key`` land: ``known`` False when the
        trial must be refolded from the store instead; ``head`` None when no head is
        to be written."""
        folds = self._folds
        fold = folds.get(key)
        first = commits[0].seq
        last = commits[-1].seq
        if fold is None or fold.last_seq + 1 != first or last - first + 1 != len(commits):
            if first != 0 or last + 1 != len(commits):
                # The trial began before this writer saw it (or its seqs have a gap).
                folds.pop(key, None)
                return not changes_head(c.kind for c in commits), None
            fold = folds[key] = _HeadFold(commits[0].created_at)
        changes = False
        # `TrialFold.apply` for each commit, as far as a head reads it (this runs
        # for every commit written: kept to the fewest operations).
        for commit in commits:
            kind = commit.kind
            if kind not in _WORK_KINDS:
                changes = True
                if kind == _REOPEN:  # its own usage is the new attempt's
                    if fold.terminal is not None and history.finished_and_scored(
                        fold.terminal, fold.evaluation
                    ):
                        # The ended attempt stands until the new one ends (a copy
                        # lands both in one batch): the one fold makes that head.
                        del folds[key]
                        return False, None
                    if fold.usage:
                        fold.earlier_usage = fold.earlier_usage + fold.usage
                    fold.usage = NO_USAGE
                    fold.first_seq = commit.seq
                    fold.started_at = commit.created_at
                    fold.terminal = fold.evaluation = None
                elif kind == _TERMINAL:
                    fold.terminal = commit
                elif kind == _EVALUATION:
                    if history.scored_terminal(commit) is not None:
                        # It names the terminal it scores: the one fold says whose.
                        del folds[key]
                        return False, None
                    fold.evaluation = commit
            u = commit.usage
            if u is not NO_USAGE and (u.input_tokens or u.output_tokens or u.cost):
                fold.usage = fold.usage + u
        fold.last_seq = last
        if not changes:
            return True, None
        terminal, evaluation = fold.terminal, fold.evaluation
        if evaluation is None and terminal is not None:
            # To be scored (`finished_and_scored`): its evaluation writes the head.
            status = history.status_of(terminal)
            if type(status) is str and status in EVALUATED_STATUSES:
                return True, None
        usage, earlier = fold.usage, fold.earlier_usage
        if earlier is not NO_USAGE and earlier:  # `TrialFold.spend`
            usage = usage + earlier
        head = _head(
            key.task_id,
            key.trial,
            last + 1,
            last - fold.first_seq + 1,
            fold.started_at,
            usage,
            terminal,
            evaluation,
        )
        if head.done:
            del folds[key]
        return True, head
