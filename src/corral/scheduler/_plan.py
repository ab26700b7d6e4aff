"""The selected task set: validated, closed over dependencies, ordered, with critical paths."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from .._errors import ConfigError
from .._ids import check_id
from .._json import check_json
from .._sources import TaskSource, sample_fields
from .._suggest import did_you_mean
from .._types import BenchmarkTaskMetadata
from ..history import ConfigStream


@dataclass(frozen=True, slots=True)
class RunPlan:
    """Tasks in run order (the order of the runner's ``tasks`` mapping)."""

    task_ids: tuple[str, ...]
    #: A tuple, or a view that reads a streamed `TaskSource` on demand.
    metadata: Sequence[BenchmarkTaskMetadata]
    parents: tuple[tuple[int, ...], ...]
    children: tuple[tuple[int, ...], ...]
    depth: tuple[int, ...]  # tasks on the longest chain from this task down, itself included
    added: frozenset[str]  # tasks the dependency closure added to the selection
    trials_per_task: int
    #: The name under which each task's output reaches its children (``session.inputs``):
    #: its own id, or in a several-models run the id it has on every model.
    output_names: tuple[str, ...] = ()

    def output_name(self, t: int) -> str:
        return self.output_names[t] if self.output_names else self.task_ids[t]

    def config(self) -> dict[str, Any]:
        """The benchmark's configuration as stored, whole (see `stored_config`)."""
        return self.stored_config().as_dict()

    def stored_config(self) -> ConfigStream:
        """The benchmark's configuration as stored: what a resumed run must match,
        produced one task at a time (a store writes and compares it in pieces).

        A streamed source's inputs are kept as a digest: a million prompts are
        never held in memory, and a changed one is still detected.
        """
        return ConfigStream(self.trials_per_task, self._stored_tasks)

    def _stored_tasks(self) -> Iterator[tuple[str, dict[str, Any]]]:
        view = self.metadata
        if isinstance(view, SourceView):
            source = view.source
            for task_id in self.task_ids:
                entry = metadata_dict(source.skeleton(task_id))
                entry["inputs"] = source.inputs_digest(task_id)
                yield task_id, entry
        else:
            for task_id, meta in zip(self.task_ids, view, strict=True):
                yield task_id, metadata_dict(meta)

    def lights(self) -> Sequence[BenchmarkTaskMetadata]:
        """Every task's metadata for planning, in task order, without a streamed task's
        inputs: a streamed source's skeleton of each, made when read (a million tasks'
        are never held at once)."""
        view = self.metadata
        if type(view) is tuple:  # not isinstance(view, SourceView): an ABC's check is slow
            return view
        assert isinstance(view, SourceView)
        return _Read(view.source.skeleton, self.task_ids)


class _Read(Sequence[BenchmarkTaskMetadata]):
    """Tasks' metadata, each read by ``read`` (from its id) when asked for."""

    __slots__ = ("_read", "task_ids")

    def __init__(
        self, read: Callable[[str], BenchmarkTaskMetadata], task_ids: tuple[str, ...]
    ) -> None:
        self._read = read
        self.task_ids = task_ids

    def __len__(self) -> int:
        return len(self.task_ids)

    @overload
    def __getitem__(self, index: int) -> BenchmarkTaskMetadata: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[BenchmarkTaskMetadata]: ...

    def __getitem__(
        self, index: int | slice
    ) -> BenchmarkTaskMetadata | Sequence[BenchmarkTaskMetadata]:
        if isinstance(index, slice):
            return list(map(self._read, self.task_ids[index]))
        return self._read(self.task_ids[index])

    def __iter__(self) -> Iterator[BenchmarkTaskMetadata]:
        return map(self._read, self.task_ids)


class SourceView(_Read):
    """The selected tasks' metadata, read from a `TaskSource` when asked for."""

    __slots__ = ("source",)

    def __init__(self, source: TaskSource, task_ids: tuple[str, ...]) -> None:
        super().__init__(source.__getitem__, task_ids)
        self.source = source


def metadata_dict(meta: BenchmarkTaskMetadata) -> dict[str, Any]:
    # Part of what a resumed run must match (scores against another target would mix);
    # absent when unset, so a configuration stored before them still matches.
    samples = sample_fields(meta)
    return {
        "agent_id": meta.agent_id,
        "environment_id": meta.environment_id,
        "model": meta.model,
        "max_iterations": meta.max_iterations,
        "dependencies": list(meta.dependencies),
        # As JSON will store it (tuples as lists), so a resumed run compares equal
        # (none, the common case, checked without a call per task).
        "inputs": {} if meta.inputs == {} else check_json(meta.inputs, "inputs"),
        **(check_json(samples, "target and metadata") if samples else samples),
    }


def build_plan(
    tasks: Mapping[str, BenchmarkTaskMetadata],
    task_ids: Sequence[str] | None,
    *,
    include_dependencies: bool,
    trials_per_task: int,
) -> RunPlan:
    """Select, close and order the tasks; refuse unknown ids, missing parents and cycles.

    A streamed `TaskSource` is planned from its in-memory skeletons (no inputs).
    """
    source = tasks if isinstance(tasks, TaskSource) else None
    if source is not None:
        tasks = source.skeletons()
    if task_ids is None:
        selected = list(tasks)
    else:
        if isinstance(task_ids, str) or not isinstance(task_ids, Sequence):
            raise ConfigError(f"task_ids must be a sequence of task ids, not {task_ids!r}")
        selected = []
        for task_id in task_ids:
            if task_id not in tasks:
                hint = did_you_mean(str(task_id), tasks)
                raise ConfigError(f"unknown task id {task_id!r} in task_ids{hint}")
            if task_id not in selected:
                selected.append(task_id)
        if not selected:
            raise ConfigError("task_ids is empty: select at least one task")
    if not selected:
        raise ConfigError("the runner has no tasks to run")
    # Most tasks have no dependencies: the checks and the graph below walk only those
    # that have (in a run of 40,000 tasks without any, planning took 19 ms, 13 of them
    # passes over every task, each reading its metadata).
    dependent = [task_id for task_id, meta in tasks.items() if meta.dependencies]
    for task_id in dependent:
        for parent in tasks[task_id].dependencies:
            if parent not in tasks:
                raise ConfigError(
                    f"task {task_id!r} depends on unknown task {parent!r}"
                    + did_you_mean(str(parent), tasks)
                )
    _refuse_cycles(tasks, dependent)

    if task_ids is None:  # every task: closed over its dependencies already
        order = selected
        added: set[str] = set()
    else:
        order, added = _closed(tasks, selected, include_dependencies)
    ids = tuple(order)
    metadata = SourceView(source, ids) if source is not None else tuple(map(tasks.__getitem__, ids))
    if dependent:
        parents, children, depth = _graph(tasks, order)
    else:  # no edges: each task alone, at depth 1
        parents = children = ((),) * len(ids)
        depth = (1,) * len(ids)
    return RunPlan(
        task_ids=ids,
        metadata=metadata,
        parents=parents,
        children=children,
        depth=depth,
        added=frozenset(added),
        trials_per_task=trials_per_task,
    )


def _graph(
    tasks: Mapping[str, BenchmarkTaskMetadata], order: list[str]
) -> tuple[tuple[tuple[int, ...], ...], tuple[tuple[int, ...], ...], tuple[int, ...]]:
    """Each task's parents and children (positions in ``order``) and depth: the longest
    chain of tasks below it, itself included."""
    index = {t: i for i, t in enumerate(order)}
    parents_of: list[tuple[int, ...]] = []
    children_of: dict[int, list[int]] = {}
    for child, task_id in enumerate(order):
        dependencies = tasks[task_id].dependencies
        if not dependencies:
            parents_of.append(())
            continue
        ps = tuple(index[p] for p in dependencies)
        parents_of.append(ps)
        for p in ps:
            children_of.setdefault(p, []).append(child)
    del index
    parents = tuple(parents_of)
    del parents_of
    children = tuple(tuple(children_of[i]) if i in children_of else () for i in range(len(order)))
    depth = [0] * len(order)
    for i in reversed(_topological(parents, children)):
        depth[i] = 1 + max((depth[c] for c in children[i]), default=0)
    return parents, children, tuple(depth)


def _closed(
    tasks: Mapping[str, BenchmarkTaskMetadata], selected: list[str], include_dependencies: bool
) -> tuple[list[str], set[str]]:
    """The selected tasks with every task they depend on, in the tasks' order, and
    those added; without ``include_dependencies`` a missing one is a `ConfigError`."""
    chosen = set(selected)
    added: set[str] = set()
    stack = list(selected)
    while stack:
        task_id = stack.pop()
        for parent in tasks[task_id].dependencies:
            if parent in chosen:
                continue
            if not include_dependencies:
                raise ConfigError(
                    f"task {task_id!r} depends on {parent!r}, which is not selected "
                    "(include_dependencies=False)"
                )
            chosen.add(parent)
            added.add(parent)
            stack.append(parent)
    return [task_id for task_id in tasks if task_id in chosen], added


def _topological(
    parents: tuple[tuple[int, ...], ...], children: tuple[tuple[int, ...], ...]
) -> list[int]:
    waiting = [len(ps) for ps in parents]
    ready = [i for i, n in enumerate(waiting) if n == 0]
    order = []
    while ready:
        i = ready.pop()
        order.append(i)
        for c in children[i]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    return order


def _refuse_cycles(tasks: Mapping[str, BenchmarkTaskMetadata], dependent: list[str]) -> None:
    """Depth-first search from each of the ``dependent`` tasks (those with dependencies,
    in order: a task without any is never on a cycle); a back edge is a cycle, reported
    as its path."""
    # 1: on the current path, 2: finished.
    colour: dict[str, int] = {}
    for root in dependent:
        if root in colour:
            continue
        path: list[str] = [root]
        iters = [iter(tasks[root].dependencies)]
        colour[root] = 1
        while path:
            parent = next(iters[-1], None)
            if parent is None:
                colour[path.pop()] = 2
                iters.pop()
                continue
            state = colour.get(parent)
            if state == 1:
                cycle = path[path.index(parent) :] + [parent]
                # Shown child -> parent -> ... as declared by `dependencies`.
                raise ConfigError("dependency cycle: " + " -> ".join(cycle))
            if state is None:
                colour[parent] = 1
                path.append(parent)
                iters.append(iter(tasks[parent].dependencies))


def model_task_id(task_id: str, model: str) -> str:
    """The id of ``task_id`` run on ``model`` in a several-models run."""
    return f"{task_id}@{model}"


def check_models(models: object, known: Sequence[str] | None) -> tuple[str, ...]:
    """Validate a model list for a several-models run."""
    if isinstance(models, str) or not isinstance(models, Sequence) or not models:
        raise ConfigError(f"models must be a non-empty sequence of model names, not {models!r}")
    out: list[str] = []
    for model in models:
        check_id("model name", model)
        if known is not None and model not in known:
            raise ConfigError(f"unknown model {model!r}; this runner knows {sorted(known)}")
        if model in out:
            raise ConfigError(f"model {model!r} is listed twice")
        out.append(model)
    return tuple(out)


def across_models(plan: RunPlan, models: Sequence[str]) -> RunPlan:
    """Every task of ``plan`` once per model, task-major so every model progresses at once.

    Task ``t`` on model ``m`` is ``t@m``; its dependencies are its parents on ``m``.
    """
    tasks: dict[str, BenchmarkTaskMetadata] = {}
    added = set()
    names: dict[str, str] = {}
    for task_id, meta in zip(plan.task_ids, plan.metadata, strict=True):
        for model in models:
            new_id = model_task_id(task_id, model)
            names[new_id] = task_id
            tasks[new_id] = dataclasses.replace(
                meta,
                model=model,
                dependencies=tuple(model_task_id(d, model) for d in meta.dependencies),
            )
            if task_id in plan.added:
                added.add(new_id)
    expanded = build_plan(
        tasks, None, include_dependencies=True, trials_per_task=plan.trials_per_task
    )
    return dataclasses.replace(
        expanded,
        added=frozenset(added),
        output_names=tuple(names[t] for t in expanded.task_ids),
    )


def scoring_plan(
    benchmark_id: str,
    config: Mapping[str, Any],
    task_ids: Sequence[str] | None,
    written: Mapping[str, BenchmarkTaskMetadata] | None = None,
) -> RunPlan:
    """The plan of a rescore: a stored benchmark's tasks (or some of them), with their
    recorded metadata and no dependencies (scoring one trial needs no other).

    ``written`` (the runner's tasks, checked against the stored ones afterwards) gives
    each task's inputs, target and metadata for its scorer, and its id as written."""
    stored: Mapping[str, Any] = config.get("tasks", {})
    if task_ids is not None:
        if isinstance(task_ids, str) or not isinstance(task_ids, Sequence) or not task_ids:
            raise ConfigError(
                f"task_ids must be a non-empty sequence of task ids, not {task_ids!r}"
            )
        for task_id in task_ids:
            if task_id not in stored:
                hint = did_you_mean(str(task_id), stored)
                raise ConfigError(f"benchmark {benchmark_id!r} has no task {task_id!r}{hint}")
    chosen = set(stored if task_ids is None else task_ids)
    tasks: dict[str, BenchmarkTaskMetadata] = {}
    names: dict[str, str] = {}
    for task_id, entry in stored.items():
        if task_id not in chosen:
            continue
        model = entry.get("model")
        name = _as_written(task_id, model, written)
        names[task_id] = name
        source = written.get(name) if written is not None else None
        tasks[task_id] = BenchmarkTaskMetadata(
            entry.get("agent_id", ""),  # a rescore never asks the agent
            entry["environment_id"],
            model=model,
            max_iterations=entry.get("max_iterations", 10),
            inputs=source.inputs if source is not None else {},
            target=source.target if source is not None else None,
            metadata=source.metadata if source is not None else {},
        )
    plan = build_plan(
        tasks, None, include_dependencies=True, trials_per_task=int(config["trials_per_task"])
    )
    return dataclasses.replace(plan, output_names=tuple(names[t] for t in plan.task_ids))


def _as_written(
    task_id: str, model: object, written: Mapping[str, BenchmarkTaskMetadata] | None
) -> str:
    """A stored task id as its file writes it: ``add@gpt-x`` of a several-models run
    is ``add`` (when the file has no task ``add@gpt-x`` of its own)."""
    suffix = f"@{model}"
    if (
        isinstance(model, str)
        and task_id.endswith(suffix)
        and (written is None or task_id not in written)
    ):
        return task_id[: -len(suffix)]
    return task_id
