"""A report's tasks kept as columns, each `TaskReport` made when it is looked at.

A report built from the store's trial heads of 100,000 tasks would otherwise hold
100,000 `TaskReport`s and `LazyTrials` (about 20 MB, and the time to make them)
that ``corral report``, ``compare`` and the viewer's headline never look at: they
read each task's outcome (`outcomes`) or a first page of tasks.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ._lazy import LazyTrials, RecordSource

if TYPE_CHECKING:
    from ._model import TaskReport

_NO_NAMED: Mapping[str, float] = MappingProxyType({})

#: The metric values of one outcome: pass@k, pass^k, the other metrics' by name.
Values = tuple[dict[int, float], dict[int, float], dict[str, dict[int, float]]]


class TaskColumns(Mapping[str, "TaskReport"]):
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
        self._ids: list[str] = []
        self._models: list[str | None] = []
        self._environments: list[str] = []
        # Each task's outcome, an index into ``_kinds``: (finished, passed, values).
        self._kinds: list[tuple[int, int, Values]] = []
        self._kind = array("l")
        self._named: dict[int, Mapping[str, float]] = {}
        self._added = added
        self._source = source
        self._position: dict[str, int] | None = None

    def append(
        self,
        task_id: str,
        model: str | None,
        environment_id: str,
        kind: int,
        named: Mapping[str, float] | None,
    ) -> None:
        """Add a task (``kind``: its outcome's index, `add_kind`)."""
        if named:
            self._named[len(self._ids)] = named
        self._ids.append(task_id)
        self._models.append(model)
        self._environments.append(environment_id)
        self._kind.append(kind)

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

    def _make(self, i: int) -> TaskReport:
        from ._model import TaskReport

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
