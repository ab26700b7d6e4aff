"""Validating one task's metadata: the one place, for mappings and streamed sources."""

from __future__ import annotations

from collections.abc import Mapping

from ._errors import ConfigError, NotSerializableError
from ._json import check_json
from ._types import BenchmarkTaskMetadata


def check_metadata(task_id: str, meta: object) -> BenchmarkTaskMetadata:
    """Raise `ConfigError` naming the task and field if ``meta`` is malformed."""
    if not isinstance(meta, BenchmarkTaskMetadata):
        raise ConfigError(
            f"task {task_id!r} must be a BenchmarkTaskMetadata, not {type(meta).__name__}"
        )
    for name in ("agent_id", "environment_id"):
        value = getattr(meta, name)
        if not isinstance(value, str) or not value:
            raise ConfigError(f"task {task_id!r} {name} must be a non-empty string, not {value!r}")
    if meta.model is not None and (not isinstance(meta.model, str) or not meta.model):
        raise ConfigError(f"task {task_id!r} model must be a non-empty string or None")
    if (
        isinstance(meta.max_iterations, bool)
        or not isinstance(meta.max_iterations, int)
        or meta.max_iterations < 1
    ):
        raise ConfigError(
            f"task {task_id!r} max_iterations must be a positive integer, "
            f"not {meta.max_iterations!r}"
        )
    for parent in meta.dependencies:
        if not isinstance(parent, str):
            raise ConfigError(f"task {task_id!r} dependency {parent!r} is not a task id")
    if not isinstance(meta.inputs, Mapping):
        raise ConfigError(f"task {task_id!r} inputs must be a mapping, not {meta.inputs!r}")
    try:
        check_json(meta.inputs, f"task {task_id!r} inputs")
    except NotSerializableError as exc:
        raise ConfigError(str(exc)) from None
    for parent in meta.dependencies:
        if parent in meta.inputs:
            raise ConfigError(
                f"task {task_id!r} has a static input named {parent!r}, which is also a "
                "dependency: the parent's output would overwrite it"
            )
    return meta
