"""A benchmark's stored configuration, typed: its trials per task and each task's metadata.

What a resumed run must match, as the store keeps it (JSON). The store checks
what it reads (``store/_decode.py``: ``trials_per_task`` an integer, each task an
object naming its environment, the known fields well typed); `StoredConfig.decode`
reads such an object, a missing field as its default; `encode` writes the keys
every earlier Corral wrote, in their order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .._types import BenchmarkTaskMetadata


@dataclass(frozen=True, slots=True)
class StoredTask:
    """One task's metadata as stored (``inputs``: the task's inputs as JSON, or for a
    streamed source their digest)."""

    agent_id: str = ""
    environment_id: str = ""
    model: str | None = None
    max_iterations: int = 10
    dependencies: tuple[str, ...] = ()
    inputs: Any = None

    @classmethod
    def of(cls, meta: BenchmarkTaskMetadata, inputs: Any) -> StoredTask:
        """``meta`` as stored, with ``inputs`` (already as JSON will store them)."""
        return cls(
            meta.agent_id,
            meta.environment_id,
            meta.model,
            meta.max_iterations,
            tuple(meta.dependencies),
            inputs,
        )

    @classmethod
    def decode(cls, entry: Mapping[str, Any]) -> StoredTask:
        get = entry.get
        return cls(
            get("agent_id", ""),
            get("environment_id", ""),
            get("model"),
            get("max_iterations", 10),
            tuple(get("dependencies", ())),
            get("inputs"),
        )

    def encode(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "environment_id": self.environment_id,
            "model": self.model,
            "max_iterations": self.max_iterations,
            "dependencies": list(self.dependencies),
            "inputs": self.inputs,
        }

    def metadata(self) -> BenchmarkTaskMetadata:
        """The task's metadata without its dependencies and inputs (what a rescore plans)."""
        return BenchmarkTaskMetadata(
            self.agent_id, self.environment_id, self.model, self.max_iterations
        )


class StoredTasks(Mapping[str, StoredTask]):
    """A stored configuration's tasks by id, each decoded when first asked for (a
    command that counts a million tasks builds no object per task)."""

    __slots__ = ("_entries", "_decoded")

    def __init__(self, entries: Mapping[str, Mapping[str, Any]]) -> None:
        self._entries = entries
        self._decoded: dict[str, StoredTask] = {}

    def __getitem__(self, task_id: str) -> StoredTask:
        task = self._decoded.get(task_id)
        if task is None:
            task = self._decoded[task_id] = StoredTask.decode(self._entries[task_id])
        return task

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def stored(self, task_id: str) -> Mapping[str, Any]:
        """``task_id``'s entry as stored (what a resumed run's must equal)."""
        return self._entries[task_id]


@dataclass(frozen=True, slots=True)
class StoredConfig:
    """A benchmark's configuration: its trials per task and its tasks' metadata."""

    trials_per_task: int
    tasks: Mapping[str, StoredTask]

    @classmethod
    def decode(cls, config: Mapping[str, Any]) -> StoredConfig:
        """A configuration as a store returns it (checked by the store)."""
        return cls(int(config.get("trials_per_task", 0)), StoredTasks(config.get("tasks", {})))

    def entry(self, task_id: str) -> Mapping[str, Any]:
        """``task_id``'s metadata as stored (what ``corral show --json`` prints)."""
        tasks = self.tasks
        return tasks.stored(task_id) if isinstance(tasks, StoredTasks) else tasks[task_id].encode()

    def encode(self) -> dict[str, Any]:
        """The configuration as stored."""
        tasks = self.tasks
        if isinstance(tasks, StoredTasks):
            entries = {t: dict(tasks.stored(t)) for t in tasks}
        else:
            entries = {t: task.encode() for t, task in tasks.items()}
        return {"trials_per_task": self.trials_per_task, "tasks": entries}
