"""The report of a run: per-task trials, its metrics (pass@k, pass^k...), counts, usage, timings."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import IO, Any, NamedTuple

from .._json import dumps_for_report
from .._types import TrialRecord, Usage
from ..history import CallCounts
from ..store._runs import RunRecord
from ._calls import calls_by_model, calls_dict
from ._errors import ErrorGroup
from ._lazy import LazyTrials
from ._metrics import METRICS, PASS_AT_K, PASS_HAT_K, Metric
from ._named import NamedScore, named_scores_of
from ._scores import Scores, interval_info, task_scores
from ._tasks import TaskColumns, TaskReport, by_k, entry_json

#: Pieces of a report file's tasks joined into one write (`BenchmarkReport.write_json`,
#: some 7 a task): a write a task cost a report of 40,000 tasks a fiftieth of a second.
_WRITTEN = 2048


class Counted(NamedTuple):
    """What a report's builder counts of its ``tasks`` as it makes them."""

    tasks: Mapping[str, TaskReport]
    #: How many tasks have each (finished, passed), of all (None) and of each model.
    outcomes: dict[str | None, Counter[tuple[int, int]]]
    #: `BenchmarkReport.model_calls`.
    calls: dict[str, CallCounts]


@dataclass(frozen=True, slots=True)
class BenchmarkReport:
    """What a run produced. ``pass_at_k`` and ``pass_hat_k`` are means over every task
    in the run; ``scores`` gives them again with their 95% confidence intervals, and
    ``scores_by_model`` per model (both computed on first use: a bootstrap, about
    0.04 s each whatever the number of tasks). ``named_scores`` (and
    ``named_scores_by_model``) give the mean of each named score of the evaluations
    with the same interval, also on first use.

    ``started_at`` and ``finished_at`` span the recorded work: the first commit of a
    finished trial and the last terminal or evaluation commit, over every run of this
    benchmark id (the gap between an interrupted run and its resume included). A run's
    report and one rebuilt from the store (``corral report``) give the same figures;
    the run's own duration is ``timings["run_seconds"]``.
    """

    benchmark_id: str
    #: Each task's report by task id, in order (a `TaskColumns` of a report built
    #: from the store's trial heads: each made on use).
    tasks: Mapping[str, TaskReport]
    pass_at_k: dict[int, float]
    counts: dict[str, int]
    usage: Usage
    trials_per_task: int
    k_values: tuple[int, ...]
    started_at: float
    finished_at: float
    #: Trials finished by an earlier run of this benchmark id and reused.
    resumed: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    #: pass@k per model (mean over that model's tasks), for runs over several models.
    by_model: dict[str, dict[int, float]] = field(default_factory=dict)
    #: Why the run stopped admitting trials before every trial finished
    #: (``fail_on_error`` or ``run_cost_limit`` reached), or None.
    stopped: str | None = None
    #: Trials that ended with status ``error``, grouped by message, most frequent first.
    errors: tuple[ErrorGroup, ...] = ()
    #: Trials whose scorer failed (``TrialRecord.evaluation_error``), grouped the same way.
    evaluation_errors: tuple[ErrorGroup, ...] = ()
    #: Trials that ended ``timeout``, ``max_iterations`` or ``limit``, by status (only
    #: those that occurred), each grouped by message like ``errors``.
    endings: dict[str, tuple[ErrorGroup, ...]] = field(default_factory=dict)
    #: The run-wide budgets of the run that made this report (``token_limit``,
    #: ``cost_limit``, ``working_time_limit``, ``run_cost_limit``), by name.
    budgets: dict[str, float] = field(default_factory=dict)
    #: Trials that ended ``limit``, by the budget that ended them.
    limited: dict[str, int] = field(default_factory=dict)
    #: Seconds the finished trials spent working (as their terminal commits recorded).
    working_seconds: float = 0.0
    #: pass^k (all k trials pass), mean over tasks, beside ``pass_at_k``.
    pass_hat_k: dict[int, float] = field(default_factory=dict)
    #: pass^k per model, beside ``by_model``.
    by_model_pass_hat_k: dict[str, dict[int, float]] = field(default_factory=dict)
    #: The metrics this report gives, in order (the first names the tables).
    metrics: tuple[Metric, ...] = METRICS
    #: Each metric's means over tasks, by metric name, then k (the built-ins' are
    #: ``pass_at_k`` and ``pass_hat_k``).
    means: dict[str, dict[int, float]] = field(default_factory=dict)
    #: The same per model: by metric name, then model, then k.
    means_by_model: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)
    #: The (last) run's tags and note, as ``run(tags=..., note=...)`` gave them.
    tags: tuple[str, ...] = ()
    note: str | None = None
    #: Where that run came from: ``corral_version``, ``benchmark_file``, ``git_commit``.
    provenance: dict[str, str] = field(default_factory=dict)
    #: That run's agents' generation settings (model, temperature, ...), by agent id.
    generation: dict[str, dict[str, Any]] = field(default_factory=dict)
    # What `scores` and `scores_by_model` computed, so each bootstrap runs once.
    _intervals: dict[str | None, Scores] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _named: dict[str | None, dict[str, NamedScore]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    #: `retries` as the report's builder counted them (None: counted on use).
    _retries: dict[str, int] | None = field(default=None, repr=False, compare=False)
    #: What the report's builder counted of ``tasks`` (None: counted on use; a report
    #: `replace`d with other tasks counts them on use too).
    _counted: Counted | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        # One dict per figure: `means` and `means_by_model` hold the built-ins' fields.
        self.means.setdefault(PASS_AT_K.name, self.pass_at_k)
        self.means.setdefault(PASS_HAT_K.name, self.pass_hat_k)
        self.means_by_model.setdefault(PASS_AT_K.name, self.by_model)
        self.means_by_model.setdefault(PASS_HAT_K.name, self.by_model_pass_hat_k)

    def _counted_now(self) -> Counted | None:
        counted = self._counted
        return counted if counted is not None and counted.tasks is self.tasks else None

    @property
    def scores(self) -> Scores:
        """Every metric (pass@k, pass^k...) over every task, each with its 95% interval."""
        return self._scores_of(None)

    @property
    def scores_by_model(self) -> dict[str, Scores]:
        """The same per model (tasks whose ``model`` is that model), for every model in
        the run, in ``by_model``'s order."""
        models = dict.fromkeys(m for per_model in self.means_by_model.values() for m in per_model)
        return {model: self._scores_of(model) for model in models}

    def _scores_of(self, model: str | None) -> Scores:
        scores = self._intervals.get(model)
        if scores is None:
            outcomes: Iterable[tuple[int, int]]
            counted = self._counted_now()
            if counted is not None:  # as the builder counted them
                outcomes = counted.outcomes.get(model, Counter()).elements()
            else:
                outcomes = [
                    (len(trials), trials.passed if isinstance(trials, LazyTrials) else t.passed)
                    for t in self.tasks.values()
                    if model is None or t.model == model
                    for trials in (t.trials,)
                ]
            named = self._named_of(model)
            scores = self._intervals[model] = replace(
                task_scores(outcomes, self.k_values, metrics=self.metrics),
                named={name: score.estimate for name, score in named.items()},
                named_tasks={name: score.tasks for name, score in named.items()},
            )
        return scores

    @property
    def named_scores(self) -> dict[str, NamedScore]:
        """The mean over tasks of every named score (``Evaluation.scores``) with its 95%
        interval, by name: a task's value is the mean over its trials that have the
        score, the mean is over the tasks that have it (see `corral.report._named`).
        Empty when no trial has a named score."""
        return self._named_of(None)

    @property
    def named_scores_by_model(self) -> dict[str, dict[str, NamedScore]]:
        """The same per model, for every model with a named score, in ``by_model``'s
        order."""
        models = dict.fromkeys(m for m in _models(self.tasks) if m is not None)
        found = {model: self._named_of(model) for model in models}
        return {model: scores for model, scores in found.items() if scores}

    def _named_of(self, model: str | None) -> dict[str, NamedScore]:
        scores = self._named.get(model)
        if scores is None:
            tasks = self.tasks
            of_tasks = (
                tasks.named(model)
                if isinstance(tasks, TaskColumns)
                else (
                    t.trials.named if isinstance(t.trials, LazyTrials) else t.named_scores
                    for t in tasks.values()
                    if model is None or t.model == model
                )
            )
            scores = self._named[model] = named_scores_of(of_tasks)
        return scores

    def labelled(self, run: RunRecord | None) -> BenchmarkReport:
        """This report with ``run``'s tags, note, provenance and generation settings
        (the run it describes; None: none)."""
        if run is None:
            return self
        return replace(
            self,
            tags=tuple(run.tags),
            note=run.note,
            provenance=dict(run.provenance),
            generation={agent: dict(s) for agent, s in run.generation.items()},
        )

    def named_scores_dict(self) -> dict[str, Any]:
        """``named_scores`` as JSON: by name, its mean, interval and tasks, and
        ``by_model`` the same per model (an empty mapping without named scores)."""
        by_model = self.named_scores_by_model
        return {
            name: score.to_dict()
            | {
                "by_model": {
                    model: of_model[name].to_dict()
                    for model, of_model in by_model.items()
                    if name in of_model
                }
            }
            for name, score in self.named_scores.items()
        }

    @property
    def retries(self) -> dict[str, int]:
        """Attempts retried after an exception, by the status their trials ended with
        (each failed attempt's error is in its trial's terminal: ``corral show``)."""
        if self._retries is not None:
            return dict(self._retries)
        out: dict[str, int] = {}
        for task in self.tasks.values():
            for t in task.trials:
                if t.attempts > 1:
                    out[str(t.status)] = out.get(str(t.status), 0) + t.attempts - 1
        return out

    def records(self) -> Iterator[TrialRecord]:
        """Every finished trial's record, task by task in the report's order: read from
        the store as it goes when the report was built from its trial heads (never all
        in memory at once)."""
        for task in self.tasks.values():
            yield from task.trials

    @property
    def model_calls(self) -> dict[str, CallCounts]:
        """The model calls of the trials reported, counted per model: calls, failed
        tries by kind (429, 5xx, timeout, dropped, refused), seconds waited on rate
        limits (see `corral.report._calls`)."""
        counted = self._counted_now()
        if counted is not None:
            return dict(counted.calls)
        return calls_by_model(t for task in self.tasks.values() for t in task.trials)

    @property
    def wall_seconds(self) -> float:
        return self.finished_at - self.started_at

    @property
    def finished(self) -> int:
        """Trials with a record: ended and, if their status is scored, scored."""
        counted = self._counted_now()
        if counted is not None:
            return sum(n * tasks for (n, _), tasks in counted.outcomes.get(None, {}).items())
        return sum(len(t.trials) for t in self.tasks.values())

    @property
    def total(self) -> int:
        return len(self.tasks) * self.trials_per_task

    @property
    def complete(self) -> bool:
        """False after an interrupted run: running the benchmark id again finishes it."""
        return self.finished == self.total

    @property
    def added_by_dependencies(self) -> list[str]:
        if isinstance(self.tasks, TaskColumns):
            return self.tasks.added()
        return [t for t, r in self.tasks.items() if r.added_by_dependencies]

    def write_json(
        self,
        file: IO[str],
        *,
        indent: int | None = None,
        trial_texts: Callable[[str, int], list[str] | None] | None = None,
    ) -> None:
        """Write `to_dict` as JSON, one task at a time, so a huge report is never one
        string (nor, built from trial heads, all its records at once). ``indent``: as
        ``json.dumps(report.to_dict(), indent=indent, default=str)`` writes it, and a
        newline. ``trial_texts(task_id, count)``: the JSON texts of a task's ``count``
        trial records if they are at hand (a run's `RecordSpool`), else None (they are
        read, from the store for a report built from it); not with ``indent``."""
        head = self.to_dict(tasks=False)
        if indent is not None:
            self._write_indented(file, head, indent)
            return
        file.write(json.dumps(head)[:-1] + ', "tasks": {')
        metrics, tasks = self.metrics, self.tasks
        if trial_texts is None:
            for i, (task_id, task) in enumerate(tasks.items()):
                file.write(("" if i == 0 else ", ") + json.dumps(task_id) + ": ")
                file.write(dumps_for_report(task.to_dict(metrics)))
        else:
            columns = tasks if isinstance(tasks, TaskColumns) else None
            entries = (
                columns.entries(metrics)
                if columns is not None
                else (
                    (t, dumps_for_report(t), entry_json(task, metrics)[:-1], len(task.trials))
                    for t, task in tasks.items()
                )
            )
            # Some `_WRITTEN` pieces in one write (the key as json.dumps writes a
            # string, made once a task).
            out: list[str] = []
            sep = ""
            for i, (task_id, key, entry, finished) in enumerate(entries):
                texts = trial_texts(task_id, finished)
                if texts is None:  # read from the store
                    task = tasks[task_id] if columns is None else columns.at(i)
                    out += (sep, key, ": ", dumps_for_report(task.to_dict(metrics)))
                else:  # as json.dumps writes the whole: the trials' key comes last
                    out += (sep, key, ": ", entry, ', "trials": [', ", ".join(texts), "]}")
                sep = ", "
                if len(out) >= _WRITTEN:
                    file.write("".join(out))
                    out.clear()
            file.write("".join(out))
        file.write("}}\n")

    def _write_indented(self, file: IO[str], head: dict[str, Any], indent: int) -> None:
        text = json.dumps({**head, "tasks": {}}, indent=indent, default=str)
        empty = "{}\n}"
        assert text.endswith(empty)
        if not self.tasks:
            file.write(text + "\n")
            return
        file.write(text[: -len(empty)] + "{")
        # A task's JSON, indented two levels in: JSON strings hold no raw newline.
        pad = "\n" + " " * (2 * indent)
        for i, (task_id, task) in enumerate(self.tasks.items()):
            body = json.dumps(task.to_dict(self.metrics), indent=indent, default=str)
            file.write(("" if i == 0 else ",") + pad + json.dumps(task_id) + ": ")
            file.write(body.replace("\n", pad))
        file.write("\n" + " " * indent + "}\n}\n")

    def to_dict(self, *, tasks: bool = True) -> dict[str, Any]:
        """Plain JSON data (``tasks=False`` leaves out the per-task part)."""
        out: dict[str, Any] = {
            "benchmark_id": self.benchmark_id,
            "trials_per_task": self.trials_per_task,
            "k_values": list(self.k_values),
        }
        for metric in self.metrics:
            out[metric.key] = by_k(self.means.get(metric.name, {}))
        out["scores"] = self.scores.to_dict()
        out["scores_by_model"] = {m: s.to_dict() for m, s in self.scores_by_model.items()}
        for metric in self.metrics:
            by_model = self.means_by_model.get(metric.name, {})
            out[metric.by_model_key] = {model: by_k(ks) for model, ks in by_model.items()}
        out["named_scores"] = self.named_scores_dict()
        out |= {
            "interval": interval_info(),
            "counts": dict(self.counts),
            "usage": self.usage.to_dict(),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "wall_seconds": self.wall_seconds,
            "finished": self.finished,
            "total": self.total,
            "complete": self.complete,
            "resumed": self.resumed,
            "retries": self.retries,
            "timings": dict(self.timings),
            "added_by_dependencies": self.added_by_dependencies,
            "stopped": self.stopped,
            "errors": [g.to_dict() for g in self.errors],
            "evaluation_errors": [g.to_dict() for g in self.evaluation_errors],
            "endings": {
                status: [g.to_dict() for g in groups] for status, groups in self.endings.items()
            },
            "budgets": dict(self.budgets),
            "limited": dict(self.limited),
            "working_seconds": self.working_seconds,
            "tags": list(self.tags),
            "note": self.note,
            "provenance": dict(self.provenance),
            "generation": {agent: dict(s) for agent, s in self.generation.items()},
        }
        calls = self.model_calls
        if calls:  # absent without any (as in reports written before they were recorded)
            out["model_calls"] = calls_dict(calls)
        if tasks:
            out["tasks"] = {
                task_id: task.to_dict(self.metrics) for task_id, task in self.tasks.items()
            }
        return out


def _models(tasks: Mapping[str, TaskReport]) -> Iterable[str | None]:
    """Each task's model, in order (no `TaskReport` made from `TaskColumns`)."""
    if isinstance(tasks, TaskColumns):
        return tasks.models()
    return (t.model for t in tasks.values())
