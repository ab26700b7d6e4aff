"""Validating one task's metadata: the one place, for mappings and streamed sources."""

from __future__ import annotations

from collections.abc import Mapping

from ._budget import BUDGET_NAMES, check_budget
from ._checks import positive_int
from ._errors import ConfigError, NotSerializableError
from ._ids import check_id
from ._json import PLAIN_MAPPINGS, check_json
from ._types import BenchmarkTaskMetadata


def check_metadata(task_id: str, meta: object) -> BenchmarkTaskMetadata:
    """Raise `ConfigError` naming the task and field if ``meta`` or the id is malformed."""
    check_id("task id", task_id)
    if not isinstance(meta, BenchmarkTaskMetadata):
        raise ConfigError(
            f"task {task_id!r} must be a BenchmarkTaskMetadata, not {type(meta).__name__}"
        )
    # These name agents, environments and models in the stored configuration and the
    # report: the same rules as any id.
    for name in ("agent_id", "environment_id"):
        check_id(f"task {task_id!r} {name}", getattr(meta, name))
    if meta.model is not None:
        check_id(f"task {task_id!r} model (a string or None)", meta.model)
    positive_int(f"task {task_id!r} max_iterations", meta.max_iterations)
    for parent in meta.dependencies:
        check_id(f"dependency of task {task_id!r}", parent)
    for name in BUDGET_NAMES:
        check_budget(name, getattr(meta, name), f"task {task_id!r}")
    if type(meta.inputs) not in PLAIN_MAPPINGS and not isinstance(meta.inputs, Mapping):
        raise ConfigError(f"task {task_id!r} inputs must be a mapping, not {meta.inputs!r}")
    try:
        check_json(meta.inputs, f"task {task_id!r} inputs")
    except NotSerializableError as exc:
        raise ConfigError(str(exc)) from None
    if type(meta.metadata) not in PLAIN_MAPPINGS and not isinstance(meta.metadata, Mapping):
        raise ConfigError(f"task {task_id!r} metadata must be a mapping, not {meta.metadata!r}")
    for name in ("target", "metadata"):
        try:
            check_json(getattr(meta, name), f"task {task_id!r} {name}")
        except NotSerializableError as exc:
            raise ConfigError(str(exc)) from None
    for parent in meta.dependencies:
        if parent in meta.inputs:
            raise ConfigError(
                f"task {task_id!r} has a static input named {parent!r}, which is also a "
                "dependency: the parent's output would overwrite it"
            )
    return meta
