"""Every async test (``pytest.mark.anyio``) runs once on asyncio and once on trio; the Ray
tests share one local Ray (`ray_cluster`).

Markers, given here in one place: ``postgres`` (a real PostgreSQL server), ``ray`` (a local
Ray), ``browser`` (Debian's Chromium), and ``slow`` for the system tests (Ray, the browser,
killed processes, restarted servers, subprocess runs of whole benchmarks) and the few long
statistical checks, so that ``pytest -m "not slow"`` runs the unit and contract tests in
under a minute."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .pg import pg_dsn, pg_pool  # noqa: F401  (a database per test, from a shared few)

if TYPE_CHECKING:
    from .ray_support import Boards


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    # Module scope, as in anyio's own plugin, so hypothesis tests may use it.
    return str(request.param)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    """One local Ray for every Ray test (starting one takes seconds): 2 CPUs, no dashboard.

    Its workers import the code under test (and these tests' helpers) by path.
    """
    if os.environ.get("CI") != "true":
        pytest.importorskip("ray")
    import ray

    root = Path(__file__).resolve().parent.parent
    path = os.pathsep.join([str(root / "src"), str(root)])
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": path}},
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def boards(ray_cluster: None) -> Iterator[Boards]:
    """The Ray tests' board actors (`tests.ray_support`), shared within a module."""
    from .ray_support import Boards

    made = Boards()
    yield made
    made.close()


# Whole modules of system tests: they kill processes, restart servers or run whole
# benchmarks in subprocesses.
SYSTEM_MODULES = frozenset(
    {
        "test_cli_interrupt",
        "test_kill9",
        "test_operator_cli",
        "test_pg_faults",
        "test_pg_logging",
        "test_pg_restart",
        "test_ray_cli",
        "test_task_cancel",
        "test_tool_agent_kill9",
        "test_viewer_browser",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        module = item.module.__name__.rpartition(".")[2] if item.module else ""
        if "pg_dsn" in fixtures:
            item.add_marker(pytest.mark.postgres)
        if "ray_cluster" in fixtures or module == "test_ray_cli":  # test_ray_cli starts its own
            item.add_marker(pytest.mark.ray)
            item.add_marker(pytest.mark.slow)
        if module == "test_viewer_browser":
            item.add_marker(pytest.mark.browser)
        if module in SYSTEM_MODULES:
            item.add_marker(pytest.mark.slow)
