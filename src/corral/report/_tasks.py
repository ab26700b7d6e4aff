"""A report's tasks kept as columns, each `TaskReport` made when it is looked at.

A report built from the store's trial heads of 100,000 tasks would otherwise hold
100,000 `TaskReport`s and `LazyTrials` (about 20 MB, and the time to make them)
that ``corral report``, ``compare`` and the viewer's headline never look at: they
read each task's outcome (`outcomes`) or a first page of tasks.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._json import dumps_for_report
from .._types import TrialRecord
from ._lazy import LazyTrials, RecordSource
from ._metrics import METRICS, PASS_AT_K, PASS_HAT_K, Metric
from ._named import task_named_scores


@dataclass(frozen=True, slots=True)
class TaskReport:
    """One task's trials (ordered by trial), its pass@k and its pass^k.

    Both are keyed by k, for each k of the report up to the task's finished trials:
    with n trials of which c passed, pass@k = 1 - C(n-c, k)/C(n, k) (at least one of
    k trials passes) and pass^k = C(c, k)/C(n, k) (all k pass).
    """

    task_id: str
    #: The finished trials' records: a list, or (in a report built from the store's
    #: trial heads) a `LazyTrials` that reads them from the store when used.
    trials: Sequence[TrialRecord]
    pass_at_k: dict[int, float]
    #: pass^k: the unbiased chance that k trials drawn from this task's all pass.
    pass_hat_k: dict[int, float] = field(default_factory=dict)
    #: True when the dependency closure added this task to the selection.
    added_by_dependencies: bool = False
    model: str | None = None
    environment_id: str = ""
    #: The values of metrics other than the built-ins (whose are the fields above), by
    #: metric name, then k.
    extra: dict[str, dict[int, float]] = field(default_factory=dict)

    @property
    def values(self) -> dict[str, dict[int, float]]:
        """Every metric's values by metric name, then k."""
        # Made on use: a dict of dicts per task would be one more object for the
        # garbage collector to walk, per task of a huge report.
        return {PASS_AT_K.name: self.pass_at_k, PASS_HAT_K.name: self.pass_hat_k, **self.extra}

    @property
    def passed(self) -> int:
        trials = self.trials
        if isinstance(trials, LazyTrials):
            return trials.passed
        return sum(1 for t in trials if t.passed)

    @property
    def named_scores(self) -> dict[str, float]:
        """Each named score (``Evaluation.scores``): the mean over this task's trials
        that have it (a scorer that abstained is left out), by name."""
        trials = self.trials
        if isinstance(trials, LazyTrials):
            return dict(trials.named)
        return task_named_scores(trials)

    def to_dict(
        self, metrics: tuple[Metric, ...] = METRICS, *, trials: bool = True
    ) -> dict[str, Any]:
        """Plain JSON data (``trials=False`` leaves the trials' records out: their
        key comes last)."""
        out: dict[str, Any] = {
            "task_id": self.task_id,
            "model": self.model,
            "environment_id": self.environment_id,
            "added_by_dependencies": self.added_by_dependencies,
        }
        values = self.values
        for metric in metrics:
            out[metric.key] = by_k(values.get(metric.name, {}))
        out["passed"] = self.passed
        named = self.named_scores
        if named:  # absent without named scores, as before there were any
            out["named_scores"] = named
        if trials:
            out["trials"] = [t.to_dict() for t in self.trials]
        return out


def by_k(values: dict[int, float]) -> dict[str, float]:
    """Values by k as JSON keys them."""
    return {str(k): v for k, v in values.items()}


_NO_NAMED: Mapping[str, float] = MappingProxyType({})

#: The metric values of one outcome: pass@k, pass^k, the other metrics' by name.
Values = tuple[dict[int, float], dict[int, float], dict[str, dict[int, float]]]


#: How many groups of tasks `TaskColumns.entries` keeps the shared text of.
_GROUPS_KEPT = 64


def entry_json(task: TaskReport, metrics: tuple[Metric, ...]) -> str:
    """``task``'s JSON in a report file, without its trials (whose key comes last)."""
    return dumps_for_report(task.to_dict(metrics, trials=False))


class TaskColumns(Mapping[str, TaskReport]):
    """`BenchmarkReport.tasks` of a report built from trial heads: task id to its
    `TaskReport`, in the report's order, each made on use (equal to the one the
    report would have held)."""

    __slots__ = (
        "_ids",
        "_models",
        "_environments",
        "_kinds",
        "_kind",
        "_named",
        "_added",
        "_source",
        "_position",
    )

    def __init__(self, source: RecordSource, added: set[str]) -> None:
        self._ids: Sequence[str] = []
        self._models: list[str | None] = []
        self._environments: list[str] = []
        # Each task's outcome, an index into ``_kinds``: (finished, passed, values).
        self._kinds: list[tuple[int, int, Values]] = []
        self._kind = array("l")
        self._named: dict[int, Mapping[str, float]] = {}
        self._added = added
        self._source = source
        self._position: dict[str, int] | None = None

    def extend(
        self,
        ids: Sequence[str],
        models: list[str | None],
        environments: list[str],
        kinds: array[int],
        named: dict[int, Mapping[str, float]],
    ) -> None:
        """Take every task's column (none before): ids, models, environments, kinds
        (each task's outcome's index, `add_kind`), and the named scores of the tasks
        that have any, by position in order."""
        self._ids, self._models, self._environments = ids, models, environments
        self._kind, self._named = kinds, named

    def add_kind(self, finished: int, passed: int, values: Values) -> int:
        self._kinds.append((finished, passed, values))
        return len(self._kinds) - 1

    def rows(self) -> Iterator[tuple[str, str | None, int, int, Mapping[str, float]]]:
        """(task id, model, finished, passed, named scores) of every task, in order,
        no `TaskReport` made."""
        kinds, kind, named = self._kinds, self._kind, self._named
        for i, (task_id, model) in enumerate(zip(self._ids, self._models, strict=True)):
            n, c, _ = kinds[kind[i]]
            yield task_id, model, n, c, named.get(i) or _NO_NAMED

    def entries(self, metrics: tuple[Metric, ...]) -> Iterator[tuple[str, str, str, int]]:
        """(task id, its JSON text, its JSON without its trials and closing brace, its
        finished trials) of every task, in order: the text
        `dumps_for_report(task.to_dict(metrics, trials=False))` writes, less its last
        character (the trials' key comes there), no `TaskReport` made for most. All but
        the id is the same for the tasks of one outcome, model and environment (and
        none of them named scores): made once, for the last few such groups (a report
        file of 40,000 tasks: 0.31 s, of which two thirds was making and encoding each
        task's dict); the id's text is made once a task, for its key and its entry."""
        made: dict[tuple[int, str | None, str, bool], str] = {}
        kinds, kind, named, added = self._kinds, self._kind, self._named, self._added
        models, environments = self._models, self._environments
        for i, task_id in enumerate(self._ids):
            k = kind[i]
            finished = kinds[k][0]
            quoted = dumps_for_report(task_id)
            if i in named:
                yield task_id, quoted, entry_json(self._make(i), metrics)[:-1], finished
                continue
            group = (k, models[i], environments[i], task_id in added)
            rest = made.get(group)
            if rest is None:
                whole = entry_json(self._make(i), metrics)
                head = '{"task_id": ' + quoted
                assert whole.startswith(head), whole
                if len(made) == _GROUPS_KEPT:  # tasks of an environment each: few repeat
                    made.clear()
                rest = made[group] = whole[len(head) : -1]
            yield task_id, quoted, '{"task_id": ' + quoted + rest, finished

    def outcomes(self) -> dict[str, tuple[int, int]]:
        """Each task's (finished, passed) by id, in order, the tuples shared by the tasks
        of one outcome."""
        of_kind = [(n, c) for n, c, _ in self._kinds]
        return dict(zip(self._ids, map(of_kind.__getitem__, self._kind), strict=True))

    def named(self, model: str | None = None) -> Iterator[Mapping[str, float]]:
        """The named scores of each task that has any (of ``model``'s tasks, if
        given), in order, no `TaskReport` made."""
        models = self._models
        for i, named in self._named.items():
            if model is None or models[i] == model:
                yield named

    def models(self) -> Iterator[str | None]:
        """Each task's model, in order."""
        return iter(self._models)

    def _at(self, task_id: str) -> int:
        if self._position is None:
            self._position = {t: i for i, t in enumerate(self._ids)}
        return self._position[task_id]

    def added(self) -> list[str]:
        """The tasks the dependency closure added, in order."""
        added = self._added
        return [t for t in self._ids if t in added] if added else []

    def at(self, i: int) -> TaskReport:
        """The report of the ``i``-th task, in order."""
        return self._make(i)

    def _make(self, i: int) -> TaskReport:
        task_id = self._ids[i]
        n, c, (at_k, hat_k, extra) = self._kinds[self._kind[i]]
        return TaskReport(
            task_id=task_id,
            trials=LazyTrials(task_id, n, c, self._named.get(i), self._source),
            pass_at_k=at_k,
            pass_hat_k=hat_k,
            added_by_dependencies=task_id in self._added,
            model=self._models[i],
            environment_id=self._environments[i],
            extra=extra,
        )

    def __getitem__(self, task_id: str) -> TaskReport:
        return self._make(self._at(task_id))

    def __contains__(self, task_id: object) -> bool:
        if not isinstance(task_id, str):
            return False
        try:
            self._at(task_id)
        except KeyError:
            return False
        return True

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def values(self) -> Any:
        return _Values(self)

    def items(self) -> Any:
        return _Items(self)

    def __repr__(self) -> str:
        return f"<{len(self._ids)} tasks, each made on use>"


class _Values:
    __slots__ = ("_of",)

    def __init__(self, of: TaskColumns) -> None:
        self._of = of

    def __len__(self) -> int:
        return len(self._of)

    def __iter__(self) -> Iterator[TaskReport]:
        make = self._of._make
        return (make(i) for i in range(len(self._of)))


class _Items(_Values):
    __slots__ = ()

    def __iter__(self) -> Iterator[tuple[str, TaskReport]]:  # type: ignore[override]
        make, ids = self._of._make, self._of._ids
        return ((ids[i], make(i)) for i in range(len(ids)))


def task_rows(
    tasks: Mapping[str, TaskReport],
) -> Iterator[tuple[str, str | None, int, int, Mapping[str, float] | TaskReport]]:
    """(task id, model, finished, passed, named scores or the task's report) of every
    task, in order: from `TaskColumns` without making a `TaskReport`."""
    if isinstance(tasks, TaskColumns):
        yield from tasks.rows()
        return
    for task_id, task in tasks.items():
        yield task_id, task.model, len(task.trials), task.passed, task


def mean_label(
    total: int, counted: Iterable[tuple[str | None, dict[int, int]]]
) -> tuple[str, str | None]:
    """The mean row's label, and a note when a mean is over fewer than the ``total``
    tasks: a mean at k is over the tasks with at least k finished trials (an interrupted
    run's), ``counted`` of them by k, per model (None: every task). A k no task has
    enough trials for shows no mean, so it needs no note."""
    counted = list(counted)
    if all(n in (0, total) for _, of_model in counted for n in of_model.values()):
        return f"mean of {total} tasks", None
    parts = [
        ("" if model is None else f"{model}: ")
        + ", ".join(f"{n} of {total} at k = {k}" for k, n in of_model.items())
        for model, of_model in counted
    ]
    note = "each mean at k is over the tasks with at least k finished trials: "
    return "mean over tasks with ≥ k trials", note + "; ".join(parts)
