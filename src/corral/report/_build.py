"""Building a report from the store's trial summaries: one source of truth."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import pairwise
from typing import Any

from .._records import TrialTable
from .._types import BenchmarkTaskMetadata, TrialRecord, TrialStatus, Usage
from ..history import StoredConfig, finished_and_scored
from ..store._protocol import TrialSummary
from ._errors import ENDING_STATUSES, ErrorGroups, ending_message
from ._metrics import METRICS, PASS_AT_K, PASS_HAT_K, Metric, checked
from ._model import BenchmarkReport, TaskReport
from ._scores import task_means


def is_finished(summary: TrialSummary) -> bool:
    """What a resume leaves alone: a terminal commit and, if its status is scored, an
    evaluation (a trial still to be scored is evaluated by the next run)."""
    return finished_and_scored(summary.terminal, summary.evaluation)


def records_from(
    summaries: Iterable[TrialSummary], *, keep_state: bool = True
) -> dict[tuple[str, int], TrialRecord]:
    """Records of every finished trial (`is_finished`), without final states if asked."""
    out = {}
    for s in summaries:
        if is_finished(s):
            out[(s.task_id, s.trial)] = s.record(keep_state=keep_state)
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
    """
    metrics = checked(metrics)
    estimators = [m.estimator for m in metrics]
    names = [m.name for m in metrics]
    at_name, hat_name = PASS_AT_K.name, PASS_HAT_K.name
    # Values of the metrics a TaskReport has no field of.
    extra = [m.name for m in metrics if m not in (PASS_AT_K, PASS_HAT_K)]
    trials_per_task = StoredConfig.decode(config).trials_per_task
    if records is None:
        records = records_from(summaries)
    by_task = _by_task(records, trials_per_task)
    added = set(added)
    tasks: dict[str, TaskReport] = {}
    outcomes: dict[str, tuple[int, int]] = {}  # (finished, passed) by task
    counts = {str(status): 0 for status in TrialStatus}
    usage = Usage()
    # Each metric's (k, value) pairs per distinct (n, passed), not per task.
    estimates: dict[tuple[int, int], tuple[tuple[tuple[int, float], ...], ...]] = {}
    errors, evaluation_errors = ErrorGroups(), ErrorGroups()
    endings = {status: ErrorGroups() for status in ENDING_STATUSES}
    first, last = float("inf"), float("-inf")
    limited: dict[str, int] = {}
    working = 0.0
    for task_id, model, environment_id in _task_meta(config, metadata):
        trials = by_task.trials(task_id) if isinstance(by_task, TrialTable) else by_task[task_id]
        passed = sum(1 for t in trials if t.passed)
        for t in trials:
            counts[str(t.status)] += 1
            if t.usage:
                usage = usage + t.usage
            if t.working_time:
                working += t.working_time
            if t.status == TrialStatus.ERROR:
                errors.add(task_id, t.trial, str(t.error))
            elif t.evaluation_error is not None:
                evaluation_errors.add(task_id, t.trial, t.evaluation_error)
            ending = endings.get(str(t.status))
            if ending is not None:
                ending.add(task_id, t.trial, ending_message(str(t.status), t.error))
            if t.limit is not None:
                limited[t.limit] = limited.get(t.limit, 0) + 1
            if t.started_at is not None and t.started_at < first:
                first = t.started_at
            if t.finished_at is not None and t.finished_at > last:
                last = t.finished_at
        n = len(trials)
        outcomes[task_id] = (n, passed)
        row = estimates.get((n, passed))
        if row is None:
            row = estimates[(n, passed)] = tuple(
                tuple((k, f(n, passed, k)) for k in k_values if k <= n) for f in estimators
            )
        # A dict per metric, built in C: this runs once per task of a huge report.
        values = dict(zip(names, map(dict, row), strict=True))
        tasks[task_id] = TaskReport(
            task_id=task_id,
            trials=trials,
            pass_at_k=values.get(at_name) or {},
            pass_hat_k=values.get(hat_name) or {},
            added_by_dependencies=task_id in added,
            model=model,
            environment_id=environment_id,
            extra={name: values[name] for name in extra} if extra else {},
        )
    # Means over the tasks with at least k finished trials: every task of a finished
    # run; in an interrupted one, a task with fewer has no pass@k yet and is left out
    # rather than counted 0.
    means = task_means(outcomes.values(), k_values, metrics)
    models = sorted({t.model for t in tasks.values() if t.model is not None})
    by_model = {
        model: task_means(
            [outcomes[t.task_id] for t in tasks.values() if t.model == model], k_values, metrics
        )
        for model in models
    }
    means_by_model = {
        m.name: {model: of_model[m.name] for model, of_model in by_model.items()} for m in metrics
    }
    unfinished = len(tasks) * trials_per_task - sum(counts.values())
    if unfinished:
        counts["unfinished"] = unfinished
    if started_at is None:
        started_at = first if first != float("inf") else 0.0
    if finished_at is None:
        finished_at = max(last, started_at)
    return BenchmarkReport(
        benchmark_id=benchmark_id,
        tasks=tasks,
        pass_at_k=means.get(PASS_AT_K.name, {}),
        pass_hat_k=means.get(PASS_HAT_K.name, {}),
        counts=counts,
        usage=usage,
        trials_per_task=trials_per_task,
        k_values=tuple(k_values),
        started_at=started_at,
        finished_at=finished_at,
        resumed=resumed,
        timings=dict(timings or {}),
        by_model=means_by_model.get(PASS_AT_K.name, {}),
        by_model_pass_hat_k=means_by_model.get(PASS_HAT_K.name, {}),
        stopped=stopped,
        errors=errors.groups(),
        evaluation_errors=evaluation_errors.groups(),
        endings={status: groups for status, g in endings.items() if (groups := g.groups())},
        budgets=dict(budgets or {}),
        limited=limited,
        working_seconds=working,
        metrics=metrics,
        means=means,
        means_by_model=means_by_model,
    )


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
