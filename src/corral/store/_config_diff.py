"""Comparing a benchmark's stored configuration with a new one (shared by backends)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import ConfigError


def check_same_config(benchmark_id: str, stored: Mapping[str, Any], new: Mapping[str, Any]) -> None:
    """Raise `ConfigError` naming the first difference, if there is one.

    A run of some of the benchmark's tasks (each with its metadata unchanged) is
    the same benchmark: it continues those tasks only.
    """
    if stored == new or _subset(stored, new):
        return
    detail = first_difference(stored, new)
    raise ConfigError(
        f"benchmark id {benchmark_id!r} already exists with a different configuration "
        f"({detail}); use a new benchmark id, or run it again with the same tasks, "
        "metadata and trials_per_task"
    )


def _subset(stored: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    if stored.get("trials_per_task") != new.get("trials_per_task"):
        return False
    old_tasks: Mapping[str, Any] = stored.get("tasks", {})
    return all(old_tasks.get(t, _MISSING) == m for t, m in new.get("tasks", {}).items())


_MISSING = object()


def first_difference(stored: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The first difference of two configurations, in words (``trials_per_task was 2,
    now 3``; ``task 'add' max_iterations was 10, now 3``)."""
    if stored.get("trials_per_task") != new.get("trials_per_task"):
        return (
            f"trials_per_task was {stored.get('trials_per_task')!r}, "
            f"now {new.get('trials_per_task')!r}"
        )
    old_tasks: Mapping[str, Any] = stored.get("tasks", {})
    new_tasks: Mapping[str, Any] = new.get("tasks", {})
    added = sorted(set(new_tasks) - set(old_tasks))
    if added:
        return f"task {added[0]!r} was not in it"
    for task_id in new_tasks:
        if old_tasks[task_id] != new_tasks[task_id]:
            for name, value in old_tasks[task_id].items():
                if new_tasks[task_id].get(name) != value:
                    return (
                        f"task {task_id!r} {name} was {value!r}, "
                        f"now {new_tasks[task_id].get(name)!r}"
                    )
            return f"task {task_id!r} metadata changed"
    return "configuration changed"
