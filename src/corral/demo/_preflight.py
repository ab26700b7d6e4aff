"""A first call before the demo runs on a real endpoint: an unreachable endpoint or a
refused key is one clear error, not forty failed trials."""

from __future__ import annotations

import anyio
import click

from .._benchmark import Benchmark
from .._errors import ConfigError, ModelError, ModelUnavailable, RateLimited

PROBE = [{"role": "user", "content": "Reply with OK."}]

#: Seconds the first call may take: a user waits for it with nothing else to see, so
#: not the client's own timeout (120 s), which suits a long answer in the run.
PROBE_TIMEOUT = 15.0


def check_endpoint(benchmark: Benchmark, base_url: str) -> None:
    """Say so on stderr, then `probe_endpoint`."""
    click.echo(f"checking {base_url} …", err=True)
    anyio.run(probe_endpoint, benchmark, base_url)


async def probe_endpoint(benchmark: Benchmark, base_url: str) -> None:
    """Ask each model of ``benchmark`` one short question; `ConfigError` naming the
    endpoint and the server's answer if one is unreachable, refuses, or gives no
    answer within `PROBE_TIMEOUT` seconds."""
    for agent in benchmark.agents.values():
        model = getattr(agent, "model", None)
        if model is None:
            continue
        try:
            with anyio.fail_after(PROBE_TIMEOUT):
                await model.complete(PROBE)
        except RateLimited:
            continue  # reachable, and the key is accepted: the run waits its turn
        except TimeoutError:
            raise ConfigError(
                f"the demo cannot use {base_url}: no answer within {PROBE_TIMEOUT:g} s"
            ) from None
        except (ModelUnavailable, ModelError) as exc:
            raise ConfigError(f"the demo cannot use {base_url}: {exc}") from None
