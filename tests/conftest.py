"""Every async test (``pytest.mark.anyio``) runs once on asyncio and once on trio; the Ray
tests share one local Ray (`ray_cluster`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

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
