"""Every async test (``pytest.mark.anyio``) runs once on asyncio and once on trio."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module", params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    # Module scope, as in anyio's own plugin, so hypothesis tests may use it.
    return str(request.param)
