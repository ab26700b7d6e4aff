"""``__all__`` is exactly the public surface, kept sorted (isort style, as ruff's RUF022)."""

from __future__ import annotations

import types

import pytest

import corral
import corral.agents
import corral.datasets
import corral.executor
import corral.history
import corral.models
import corral.progress
import corral.report
import corral.runtime
import corral.scheduler
import corral.scorers
import corral.store
import corral.testing
import corral.view


def isort_key(name: str) -> tuple[int, str]:
    # CONSTANTS, then Classes, then everything else; each group in code-point order.
    return (0 if name.isupper() else 1 if name[:1].isupper() else 2, name)


@pytest.mark.parametrize(
    ("module", "private_members"),
    [
        (corral, {"__version__"}),
        (corral.testing, set()),
        (corral.models, set()),
        (corral.agents, set()),
        (corral.view, set()),
        (corral.scorers, set()),
        (corral.datasets, set()),
        # The engine's packages: what they hand the runner, the CLI and each other.
        (corral.executor, set()),
        (corral.history, set()),
        (corral.progress, set()),
        (corral.report, set()),
        (corral.runtime, set()),
        (corral.scheduler, set()),
        (corral.store, set()),
    ],
    ids=[
        "corral",
        "corral.testing",
        "corral.models",
        "corral.agents",
        "corral.view",
        "corral.scorers",
        "corral.datasets",
        "corral.executor",
        "corral.history",
        "corral.progress",
        "corral.report",
        "corral.runtime",
        "corral.scheduler",
        "corral.store",
    ],
)
def test_all_is_the_sorted_public_surface(
    module: types.ModuleType, private_members: set[str]
) -> None:
    for name in module.__all__:  # a lazily imported name (corral.view.create_app) too
        getattr(module, name)
    exported = [
        name
        for name, value in vars(module).items()
        if (not name.startswith("_") or name in private_members)
        and not isinstance(value, types.ModuleType)  # subpackages are reached by import
    ]
    assert module.__all__ == sorted(module.__all__, key=isort_key)
    assert sorted(module.__all__) == sorted(exported)


def test_every_exported_name_resolves() -> None:
    for name in corral.__all__:
        assert getattr(corral, name) is not None, name
    for name in corral.testing.__all__:
        assert getattr(corral.testing, name) is not None, name
    for name in corral.view.__all__:
        assert getattr(corral.view, name) is not None, name


def test_the_executors_are_public() -> None:
    # Any Executor runs a benchmark's trials; LocalExecutor is the default.
    assert {"Executor", "LocalExecutor", "RayExecutor"} <= set(corral.__all__)
    assert isinstance(corral.LocalExecutor(), corral.Executor)
    assert isinstance(corral.RayExecutor(), corral.Executor)
    assert not isinstance(object(), corral.Executor)


def test_run_settings_are_public() -> None:
    # A run's settings as one value, and its limits.
    assert {"Limits", "RunConfig"} <= set(corral.__all__)
    assert corral.RunConfig().limits == corral.Limits()
