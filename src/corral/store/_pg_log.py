"""psycopg's own log lines, into Corral's log at DEBUG.

psycopg warns about what the store already handles: a pooled connection that
broke during an outage the store rides through (``discarding closed connection``,
one line per connection of the pool at each server restart).
With no logging configured, Python prints such warnings to stderr; a handler of
our own on psycopg's loggers stops that, and passes each line on to
``corral.store.psycopg`` at DEBUG. A program that configured logging still gets
psycopg's records as before (they propagate as usual).
"""

from __future__ import annotations

import logging

log = logging.getLogger("corral.store.psycopg")

_SOURCES = ("psycopg", "psycopg_pool")


class _Forward(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        log.debug("%s: %s", record.name, record.getMessage())


def route_psycopg_logs() -> None:
    """Send psycopg's log lines to Corral's log (once per process; idempotent)."""
    for name in _SOURCES:
        source = logging.getLogger(name)
        if not any(isinstance(h, _Forward) for h in source.handlers):
            source.addHandler(_Forward())
