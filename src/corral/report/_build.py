"""Building a report from the store's trial summaries: one source of truth."""

from __future__ import annotations

import operator
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import pairwise, repeat
from typing import Any, Protocol

from .._positions import Positions
from .._records import TrialTable
from .._types import NO_USAGE, BenchmarkTaskMetadata, TrialRecord, TrialStatus, Usage
from ..history import CallCounts, StoredConfig, finished_and_scored
from ..store._heads import TaskList, TrialHead
from ..store._protocol import TrialSummary
from ._bootstrap import plain_mean
from ._calls import CallTally
from ._errors import ENDING_STATUSES, ErrorGroup, ErrorGroups, ending_message
from ._lazy import RecordSource
from ._metrics import METRICS, PASS_AT_K, PASS_HAT_K, Metric, checked
from ._model import BenchmarkReport, Counted
from ._scores import task_means
from ._tasks import TaskColumns, TaskReport, Values


def is_finished(summary: TrialSummary) -> bool:
    """Whether a report counts the trial: its counted attempt (`TrialSummary.counted`)
    has a terminal commit and, if its status is scored, an evaluation (a trial still
    to be scored is evaluated by the next run)."""
    counted = summary.counted()
    return finished_and_scored(counted.terminal, counted.evaluation)


def records_from(
    summaries: Iterable[TrialSummary], *, keep_state: bool = True
) -> dict[tuple[str, int], TrialRecord]:
    """Records of every finished trial (`is_finished`), without final states if asked."""
    out = {}
    for s in summaries:
        if is_finished(s):
            out[(s.task_id, s.trial)] = s.counted().record(keep_state=keep_state)
    return out


def build_report(
    benchmark_id: str,
    config: Mapping[str, Any],
    summaries: Iterable[TrialSummary] = (),
    *,
    records: Mapping[tuple[str, int], TrialRecord] | None = None,
    metadata: Iterable[tuple[str, BenchmarkTaskMetadata]] | None = None,
    k_values: Sequence[int],
    added: Iterable[str] = (),
    started_at: float | None = None,
    finished_at: float | None = None,
    resumed: int = 0,
    timings: Mapping[str, float] | None = None,
    stopped: str | None = None,
    budgets: Mapping[str, float] | None = None,
    metrics: Sequence[Metric] = METRICS,
) -> BenchmarkReport:
    """The report of ``benchmark_id`` as ``config`` (its stored configuration) defines it.

    Give either the store's ``summaries`` or ``records`` already built from them.
    ``metadata`` (each task's id and metadata, in run order) stands in for
    ``config["tasks"]``: a run gives its plan's, so no dict per task is built.
    A `TrialTable` of records lends each task its row as the report's trial list.
    ``started_at`` and ``finished_at`` default to the span of the records (see
    `BenchmarkReport`), which is what a run and ``corral report`` both use.
    ``metrics`` are the per-task estimators the report gives (each with its means,
    per model and intervals), the built-in pass@k and pass^k unless told.
    (`report_from_heads` builds the same report from the store's trial heads.)
    """
    trials_per_task = StoredConfig.decode(config).trials_per_task
    if records is None:
        records = records_from(summaries)
    by_task = _by_task(records, trials_per_task)
    tally = _Tally()
    tasks: list[_TaskRow] = []
    for task_id, model, environment_id in _task_meta(config, metadata):
        trials = by_task.trials(task_id) if isinstance(by_task, TrialTable) else by_task[task_id]
        for t in trials:
            tally.add(task_id, len(tasks), t)
        passed = sum(1 for t in trials if t.passed)
        tasks.append((task_id, model, environment_id, len(trials), passed, trials))
    metrics = checked(metrics)
    outcomes = _Outcomes(metrics, k_values)
    return _assemble(
        benchmark_id,
        trials_per_task,
        _task_reports(tasks, outcomes, set(added)),
        outcomes,
        tally,
        k_values=k_values,
        started_at=started_at,
        finished_at=finished_at,
        resumed=resumed,
        timings=timings,
        stopped=stopped,
        budgets=budgets,
    )


def report_from_heads(
    benchmark_id: str,
    config: Mapping[str, Any],
    heads: Iterable[TrialHead],
    source: RecordSource,
    *,
    metadata: Iterable[tuple[str, BenchmarkTaskMetadata]] | None = None,
    **options: Any,
) -> BenchmarkReport:
    """`build_report`'s report from the store's trial heads (one short row per trial,
    in any order): the same figures, each task's trials read from ``source`` only
    when they are used (`LazyTrials`). ``options``: `build_report`'s from ``k_values``."""
    tally = HeadTally(task_list(config, metadata))
    tally.add(heads)
    return tally.report(benchmark_id, source, **options)


class HeadTally:
    """`report_from_heads` a chunk of heads at a time (a store gives them so). It takes
    ``tasks`` over: their list is emptied as the report is made."""

    def __init__(self, tasks: TaskList) -> None:
        self.trials_per_task = tasks.trials_per_task
        self._meta = tasks.tasks
        meta = self._meta
        ids = meta.ids if isinstance(meta, PlanTasks) else [task_id for task_id, _, _ in meta]
        self._ids = ids
        self._index = Positions(ids)
        self._tally = _Tally()
        # Finished and passed trials by task position (lists, not arrays: an array's item
        # is parsed as a C long each time it is set, twice a head; a small count is a
        # shared int, so a list takes no more room); named score values by position,
        # for the tasks that have any.
        self._finished = [0] * len(self._meta)
        self._passed = [0] * len(self._meta)
        self._named: dict[int, dict[str, list[float]]] = {}

    def add(self, heads: Iterable[TrialHead]) -> None:
        index, tally, n = self._index, self._tally, self.trials_per_task
        finished, passed = self._finished, self._passed
        plain = tally.plain
        for head in heads:
            # The fields read as one unpacking: each read as the named tuple's attribute
            # is a descriptor call, and this runs for every trial of a report.
            (task_id, trial, _, done, status, won, _, scores, error, evaluation_error, attempts,
             _, started_at, finished_at, usage, limit, working_time, calls) = head  # fmt: skip
            position = index.get(task_id)
            if not done or position is None or not 0 <= trial < n:
                continue
            if (
                usage is NO_USAGE
                and error is None
                and evaluation_error is None
                and limit is None
                and attempts == 1
                and calls is None
                and status in _PLAIN_STATUSES
            ):  # most heads: only counted, their span and working time summed
                plain(position, trial, status, started_at, finished_at, working_time)
            else:
                tally.add(task_id, position, head)
            finished[position] += 1
            if won:
                passed[position] += 1
            if scores:
                named = self._named.setdefault(position, {})
                for name, value in scores.items():
                    named.setdefault(name, []).append(float(value))

    def report(
        self,
        benchmark_id: str,
        source: RecordSource,
        *,
        k_values: Sequence[int],
        added: Iterable[str] = (),
        started_at: float | None = None,
        finished_at: float | None = None,
        resumed: int = 0,
        timings: Mapping[str, float] | None = None,
        stopped: str | None = None,
        budgets: Mapping[str, float] | None = None,
        metrics: Sequence[Metric] = METRICS,
    ) -> BenchmarkReport:
        del self._index
        metrics = checked(metrics)
        outcomes = _Outcomes(metrics, k_values)
        return _assemble(
            benchmark_id,
            self.trials_per_task,
            self._columns(source, set(added), outcomes),
            outcomes,
            self._tally,
            k_values=k_values,
            started_at=started_at,
            finished_at=finished_at,
            resumed=resumed,
            timings=timings,
            stopped=stopped,
            budgets=budgets,
        )

    def _columns(self, source: RecordSource, added: set[str], outcomes: _Outcomes) -> TaskColumns:
        """The report's tasks, made a column at a time: every task's outcome counted
        (`_Outcomes.count`) and its kind found in C, no tuple nor call per task but
        its metadata's. The task list is emptied once read (its tuples freed)."""
        meta, ids = self._meta, self._ids
        finished, passed = self._finished, self._passed
        models: list[str | None] = []
        environments: list[str] = []
        for _, model, environment_id in meta:
            models.append(model)
            environments.append(environment_id)
        if isinstance(meta, list):
            meta.clear()
        self._meta = []
        columns = TaskColumns(source, added)
        kinds = outcomes.count(finished, passed, models, columns)
        found = self._named
        named: dict[int, Mapping[str, float]] = {
            position: {k: plain_mean(v) for k, v in found[position].items()}
            for position in sorted(found)
        }
        columns.extend(ids, models, environments, kinds, named)
        return columns


class PlanTasks(Sequence[tuple[str, str | None, str]]):
    """A run plan's tasks as `TaskList` lists them, (task id, model, environment id),
    each made when read: the run's own report lists no tuple per task."""

    __slots__ = ("ids", "_meta")

    def __init__(self, ids: Sequence[str], meta: Sequence[BenchmarkTaskMetadata]) -> None:
        self.ids = ids
        self._meta = meta

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self.ids)))]
        meta = self._meta[i]
        return self.ids[i], meta.model, meta.environment_id

    def __iter__(self) -> Iterator[tuple[str, str | None, str]]:
        for task_id, m in zip(self.ids, self._meta, strict=True):
            yield task_id, m.model, m.environment_id


#: A task of a report: id, model, environment, finished, passed, and its trials (a
#: report of records) or its named scores (a report of heads: `TaskColumns`).
_TaskRow = tuple[str, str | None, str, int, int, Any]


class _Trial(Protocol):
    """What a report sums of a trial: a `TrialRecord` and a `TrialHead` both have it."""

    @property
    def trial(self) -> int: ...
    @property
    def status(self) -> str | None: ...
    @property
    def passed(self) -> bool: ...
    @property
    def error(self) -> str | None: ...
    @property
    def evaluation_error(self) -> str | None: ...
    @property
    def attempts(self) -> int: ...
    @property
    def started_at(self) -> float | None: ...
    @property
    def finished_at(self) -> float | None: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def limit(self) -> str | None: ...
    @property
    def working_time(self) -> float | None: ...
    @property
    def model_calls(self) -> Mapping[str, CallCounts] | None: ...


class _Tally:
    """The benchmark-wide sums of a report, one trial at a time, whatever the order the
    trials come in: counts and spans as they come, sums exactly (`fsum`), and the
    trials that make error groups kept to be grouped in task order."""

    def __init__(self) -> None:
        self.counts = {str(status): 0 for status in TrialStatus}
        self.input_tokens = self.output_tokens = 0
        self.costs = _OrderedSum()
        self.working = _OrderedSum()
        self.limited: dict[str, int] = {}
        self.retries: dict[str, int] = {}
        self.first, self.last = float("inf"), float("-inf")
        self.calls = CallTally()
        # (task position, trial, task id, which groups, message)
        self.grouped: list[tuple[int, int, str, str, str]] = []

    def add(self, task_id: str, position: int, t: _Trial) -> None:
        status = t.status
        if type(status) is not str:  # a record's TrialStatus (a head's is its text)
            status = str(status)
        self.plain(position, t.trial, status, t.started_at, t.finished_at, t.working_time)
        usage = t.usage
        if usage is not NO_USAGE and usage:  # most heads share the one of no usage
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            if usage.cost:
                self.costs.add(position, t.trial, usage.cost)
        if status == _ERROR:
            self.grouped.append((position, t.trial, task_id, _ERROR, str(t.error)))
        elif t.evaluation_error is not None:
            self.grouped.append((position, t.trial, task_id, "", t.evaluation_error))
        if status in ENDING_STATUSES:
            message = ending_message(status, t.error)
            self.grouped.append((position, t.trial, task_id, status, message))
        if t.limit is not None:
            self.limited[t.limit] = self.limited.get(t.limit, 0) + 1
        if t.attempts > 1:
            self.retries[status] = self.retries.get(status, 0) + t.attempts - 1
        if t.model_calls:
            self.calls.add(t.model_calls)

    def plain(
        self,
        position: int,
        trial: int,
        status: str,
        started_at: float | None,
        finished_at: float | None,
        working_time: float | None,
    ) -> None:
        """`add` of what every trial has: all of a trial with no usage, error, limit,
        retry nor model calls and a status grouped by none (`_PLAIN_STATUSES`)."""
        self.counts[status] += 1
        if working_time:
            self.working.add(position, trial, working_time)
        if started_at is not None and started_at < self.first:
            self.first = started_at
        if finished_at is not None and finished_at > self.last:
            self.last = finished_at

    def groups(self) -> dict[str, tuple[ErrorGroup, ...]]:
        """Error groups by kind (``error``, ``""`` for failed evaluations, each ending
        status), each made in task order, then trial order."""
        found: dict[str, ErrorGroups] = {}
        for _, trial, task_id, kind, message in sorted(self.grouped, key=lambda e: e[:2]):
            found.setdefault(kind, ErrorGroups()).add(task_id, trial, message)
        return {kind: g.groups() for kind, g in found.items()}

    @property
    def usage(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.costs.total())


class _OrderedSum:
    """A float sum made in task order, then trial order, whatever order the terms
    come in: the same bits as a report summed record by record."""

    __slots__ = ("_keys", "_values")

    def __init__(self) -> None:
        self._keys = array("q")
        self._values = array("d")

    def add(self, position: int, trial: int, value: float) -> None:
        self._keys.append(position * _TRIALS_BOUND + trial)
        self._values.append(value)

    def total(self) -> float:
        keys, values = self._keys, self._values
        if all(a <= b for a, b in pairwise(keys)):
            order: Iterable[int] = range(len(values))
        else:
            order = sorted(range(len(values)), key=keys.__getitem__)
        out = 0.0
        for i in order:
            out += values[i]
        return out


#: Above any trial number (`MAX_TRIALS_PER_TASK`).
_TRIALS_BOUND = 1 << 21


_ERROR = str(TrialStatus.ERROR)
#: Statuses `_Tally.add` groups no trial of by its status (an error, an ending).
_PLAIN_STATUSES = frozenset(str(s) for s in TrialStatus) - {_ERROR, *ENDING_STATUSES}


class _Outcomes:
    """How many tasks have each (finished, passed), over all and per model (what the
    means need), and each metric's values of an outcome, made once for the tasks
    that have it (a huge report has few distinct outcomes)."""

    def __init__(self, metrics: tuple[Metric, ...], k_values: Sequence[int]) -> None:
        self.metrics = metrics
        self.k_values = k_values
        self.all: Counter[tuple[int, int]] = Counter()
        self.of_models: defaultdict[str, Counter[tuple[int, int]]] = defaultdict(Counter)
        self._values: dict[tuple[int, int], Values] = {}
        # One empty dict of the tasks that have no value of a metric (few trials).
        self._none: dict[int, float] = {}
        self._no_extra: dict[str, dict[int, float]] = {}

    def values(self, outcome: tuple[int, int]) -> Values:
        """pass@k, pass^k and the other metrics' values by name, of ``outcome``."""
        made = self._values.get(outcome)
        if made is None:
            n, passed = outcome
            ks, none = self.k_values, self._none
            values = {
                m.name: {k: m.estimator(n, passed, k) for k in ks if k <= n} for m in self.metrics
            }
            extra = {m.name: values[m.name] for m in self.metrics if m not in _K_METRICS}
            made = self._values[outcome] = (
                values.get(PASS_AT_K.name) or none,
                values.get(PASS_HAT_K.name) or none,
                extra or self._no_extra,
            )
        return made

    def add(self, outcome: tuple[int, int], model: str | None) -> Values:
        """Count a task of ``outcome`` (and ``model``); its values."""
        self.all[outcome] += 1
        if model is not None:
            self.of_models[model][outcome] += 1
        return self.values(outcome)

    def count(
        self,
        finished: Sequence[int],
        passed: Sequence[int],
        models: list[str | None],
        columns: TaskColumns,
    ) -> array[int]:
        """`add` every task, of ``finished`` and ``passed`` trials (and ``models``),
        counted in C with no object kept per task (an outcome is one integer,
        ``finished * _TRIALS_BOUND + passed``, while counted); each task's kind of
        ``columns`` (`TaskColumns.add_kind`), made in the order the outcomes first
        come, as `add` finds them."""
        codes = array(
            "q", map(operator.add, map(operator.mul, finished, repeat(_TRIALS_BOUND)), passed)
        )
        outcome_of: dict[int, tuple[int, int]] = {}
        for code, n in Counter(codes).items():
            outcome = outcome_of[code] = divmod(code, _TRIALS_BOUND)
            self.all[outcome] = n
        for (model, code), n in Counter(zip(models, codes, strict=True)).items():
            if model is not None:
                self.of_models[model][outcome_of[code]] = n
        kinds = {
            code: columns.add_kind(o[0], o[1], self.values(o)) for code, o in outcome_of.items()
        }
        return array("l", map(kinds.__getitem__, codes))


_K_METRICS = (PASS_AT_K, PASS_HAT_K)


def _task_reports(
    tasks: Iterable[_TaskRow], outcomes: _Outcomes, added: set[str]
) -> dict[str, TaskReport]:
    """The report of each of ``tasks`` (id, model, environment, finished, passed,
    trials), in order, each counted in ``outcomes``."""
    reports: dict[str, TaskReport] = {}
    for task_id, model, environment_id, n, passed, trials in tasks:
        at_k, hat_k, extra = outcomes.add((n, passed), model)
        reports[task_id] = TaskReport(
            task_id=task_id,
            trials=trials,
            pass_at_k=at_k,
            pass_hat_k=hat_k,
            added_by_dependencies=task_id in added,
            model=model,
            environment_id=environment_id,
            extra=extra,
        )
    return reports


def _assemble(
    benchmark_id: str,
    trials_per_task: int,
    made: Mapping[str, TaskReport],
    outcomes: _Outcomes,
    tally: _Tally,
    *,
    k_values: Sequence[int],
    started_at: float | None,
    finished_at: float | None,
    resumed: int,
    timings: Mapping[str, float] | None,
    stopped: str | None,
    budgets: Mapping[str, float] | None,
) -> BenchmarkReport:
    """The report of the tasks ``made`` (each counted in ``outcomes``, which says the
    metrics), in order, and their ``tally``."""
    metrics = outcomes.metrics
    # Means over the tasks with at least k finished trials: every task of a finished
    # run; in an interrupted one, a task with fewer has no pass@k yet and is left out
    # rather than counted 0.
    of_models = outcomes.of_models
    means = task_means(outcomes.all.elements(), k_values, metrics)
    by_model = {
        model: task_means(of_models[model].elements(), k_values, metrics)
        for model in sorted(of_models)
    }
    means_by_model = {
        m.name: {model: of_model[m.name] for model, of_model in by_model.items()} for m in metrics
    }
    counts = tally.counts
    unfinished = len(made) * trials_per_task - sum(counts.values())
    if unfinished:
        counts["unfinished"] = unfinished
    if started_at is None:
        started_at = tally.first if tally.first != float("inf") else 0.0
    if finished_at is None:
        finished_at = max(tally.last, started_at)
    groups = tally.groups()
    return BenchmarkReport(
        benchmark_id=benchmark_id,
        tasks=made,
        pass_at_k=means.get(PASS_AT_K.name, {}),
        pass_hat_k=means.get(PASS_HAT_K.name, {}),
        counts=counts,
        usage=tally.usage,
        trials_per_task=trials_per_task,
        k_values=tuple(k_values),
        started_at=started_at,
        finished_at=finished_at,
        resumed=resumed,
        timings=dict(timings or {}),
        by_model=means_by_model.get(PASS_AT_K.name, {}),
        by_model_pass_hat_k=means_by_model.get(PASS_HAT_K.name, {}),
        stopped=stopped,
        errors=groups.get(_ERROR, ()),
        evaluation_errors=groups.get("", ()),
        endings={status: groups[status] for status in ENDING_STATUSES if status in groups},
        budgets=dict(budgets or {}),
        limited=tally.limited,
        working_seconds=tally.working.total(),
        metrics=metrics,
        means=means,
        means_by_model=means_by_model,
        _retries=tally.retries,
        _counted=Counted(made, _by_model_or_all(outcomes.all, of_models), tally.calls.total()),
    )


def _by_model_or_all(
    outcomes: Counter[tuple[int, int]], of_models: Mapping[str, Counter[tuple[int, int]]]
) -> dict[str | None, Counter[tuple[int, int]]]:
    out: dict[str | None, Counter[tuple[int, int]]] = {None: outcomes}
    out.update(of_models)
    return out


def task_list(
    config: Mapping[str, Any], metadata: Iterable[tuple[str, BenchmarkTaskMetadata]] | None = None
) -> TaskList:
    """What a report needs of a benchmark's configuration (``metadata``: each task's, in
    run order, in place of ``config["tasks"]``)."""
    trials_per_task = StoredConfig.decode(config).trials_per_task
    return TaskList(trials_per_task, list(_task_meta(config, metadata)))


def _task_meta(
    config: Mapping[str, Any], metadata: Iterable[tuple[str, BenchmarkTaskMetadata]] | None
) -> Iterator[tuple[str, str | None, str]]:
    """(task id, model, environment id) of every task, in order."""
    if metadata is None:
        for task_id, meta in StoredConfig.decode(config).tasks.items():
            yield task_id, meta.model, meta.environment_id
    else:
        for task_id, task in metadata:
            yield task_id, task.model, task.environment_id


def _by_task(
    records: Mapping[tuple[str, int], TrialRecord], trials_per_task: int
) -> TrialTable | defaultdict[str, list[TrialRecord]]:
    """Each task's records in trial order, in one pass over the records (a stored
    trials_per_task, however large, is never walked)."""
    if isinstance(records, TrialTable):
        return records
    out: defaultdict[str, list[TrialRecord]] = defaultdict(list)
    for (task_id, trial), record in records.items():
        if 0 <= trial < trials_per_task:
            out[task_id].append(record)
    for trials in out.values():  # a store's scan gives them in order already
        if any(a.trial > b.trial for a, b in pairwise(trials)):
            trials.sort(key=lambda t: t.trial)
    return out
