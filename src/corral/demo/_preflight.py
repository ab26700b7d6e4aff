"""A first call before the demo runs on a real endpoint: an unreachable endpoint or a
refused key is one clear error, not forty failed trials."""

from __future__ import annotations

import anyio

from .._benchmark import Benchmark
from .._errors import ConfigError, ModelError, ModelUnavailable, RateLimited

PROBE = [{"role": "user", "content": "Reply with OK."}]


def check_endpoint(benchmark: Benchmark, base_url: str) -> None:
    """Ask each model of ``benchmark`` one short question; `ConfigError` naming the
    endpoint and the server's answer if one is unreachable or refused."""
    anyio.run(_check, benchmark, base_url)


async def _check(benchmark: Benchmark, base_url: str) -> None:
    for agent in benchmark.agents.values():
        model = getattr(agent, "model", None)
        if model is None:
            continue
        try:
            await model.complete(PROBE)
        except RateLimited:
            continue  # reachable, and the key is accepted: the run waits its turn
        except (ModelUnavailable, ModelError) as exc:
            raise ConfigError(f"the demo cannot use {base_url}: {exc}") from None
