"""Every async test (``pytest.mark.anyio``) runs once on asyncio and once on trio; the Ray
tests share one local Ray (`ray_cluster`); the PostgreSQL tests a few databases (`pg_dsn`).

The tests are filed by subject: ``unit/`` (one part, in process), ``contract/`` (what
every store backend, and the runner against the limits' reference model, must keep),
``system/`` (killed processes, restarted servers, Ray, the browser, whole benchmarks in
subprocesses) and ``support/`` (helpers and the child scripts the system tests run).

Markers, given here by folder and fixture: ``postgres`` (a real PostgreSQL server: the `pg_dsn`
fixture or a ``postgres`` parameter), ``ray`` (a local Ray), ``browser`` (Debian's
Chromium), and ``slow`` for everything in ``system/``; a few tests elsewhere are marked
``slow`` where they are (one that starts a process, or a long statistical check), so that
``pytest -m "not slow"`` runs the unit and contract tests in under a minute."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .support.pg import pg_dsn, pg_pool  # noqa: F401  (a database per test, from a shared few)

# The suite writes bytecode even where the environment says not to
# (PYTHONDONTWRITEBYTECODE): otherwise every process it starts (the CLI, crash
# children, Ray's workers) compiles Corral again, about 0.15 s of CPU each.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

if TYPE_CHECKING:
    from .support.ray_support import Boards


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
    """The Ray tests' board actors (`tests.support.ray_support`), shared within a module."""
    from .support.ray_support import Boards

    made = Boards()
    yield made
    made.close()


# ``slow`` by folder: the system tests kill processes, restart servers, start Ray or a
# browser, or run whole benchmarks in subprocesses.
SLOW_FOLDERS = frozenset({"system"})


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With ``-m "not slow"`` the slow folders are not even imported (Ray, Playwright)."""
    if config.getoption("markexpr", "") != "not slow":
        return None
    here = Path(__file__).resolve().parent
    return collection_path.resolve() in {here / folder for folder in SLOW_FOLDERS} or None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        path = Path(item.path).resolve()
        folder = path.relative_to(here).parts[0] if path.is_relative_to(here) else ""
        callspec = getattr(item, "callspec", None)
        params = callspec.params.values() if callspec is not None else ()
        if "pg_dsn" in fixtures or any(p == "postgres" for p in params if isinstance(p, str)):
            item.add_marker(pytest.mark.postgres)
        on_ray = callspec is not None and callspec.params.get("executor_kind") == "ray"
        # test_ray_cli starts a Ray of its own; an executor contract test asks for it by
        # name; test_ray_stores (unit) needs none. Every Ray test is slow.
        if (
            "ray_cluster" in fixtures
            or on_ray
            or (folder == "system" and path.name.startswith("test_ray_"))
        ):
            item.add_marker(pytest.mark.ray)
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.ray)
        if "browser" in fixtures:
            item.add_marker(pytest.mark.browser)
        if folder in SLOW_FOLDERS:
            item.add_marker(pytest.mark.slow)
