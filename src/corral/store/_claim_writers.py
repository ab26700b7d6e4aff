"""Who writes under a PostgreSQL claim (`corral.claim_writers`): its holder, as
`HOLDER`, and each Ray host that joined it, by its number (0, 1, ...)."""

from __future__ import annotations

from .._errors import ConfigError

#: The host number a claim's holder writes as.
HOLDER = -1


def check_host(host: object) -> None:
    """`ConfigError` unless ``host`` is a Ray host's number (an integer from 0)."""
    if isinstance(host, bool) or not isinstance(host, int) or host < 0:
        raise ConfigError(f"a host's number is an integer from 0, not {host!r}")
