"""psycopg's own log lines (a ``discarding closed connection`` warning for each pooled
connection an outage the store rides through broke) go into Corral's log, at DEBUG:
silent when nothing is configured, there for whoever turns Corral's debug log on."""

from __future__ import annotations

import logging

import pytest

from corral import PostgresStore

from ..contract.test_store import K, trial
from ..support import pg

pytestmark = pytest.mark.anyio
pg_dsn = pg.pg_dsn


class Recorder(logging.Handler):
    def __init__(self, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


async def test_psycopg_s_lines_reach_corral_s_debug_log_not_stderr(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Logging as a program that configured nothing has it: whatever no handler
    # takes goes to logging.lastResort (stderr, WARNING and up).
    shown = Recorder(logging.WARNING)
    monkeypatch.setattr(logging, "lastResort", shown)
    monkeypatch.setattr(logging.root, "handlers", [])
    kept = Recorder()
    corral_log = logging.getLogger("corral")
    monkeypatch.setattr(corral_log, "handlers", [kept])
    level = corral_log.level
    corral_log.setLevel(logging.DEBUG)  # setLevel: loggers cache what is enabled
    try:
        store = PostgresStore(pg_dsn)
        async with store.opened():
            await store.append(K, trial())
            assert await store.history(K) == trial()
            pg.terminate(pg_dsn, "corral reader")  # the pool's connections broke
            assert await store.history(K) == trial()  # ridden through
    finally:
        corral_log.setLevel(level)

    assert [r.getMessage() for r in shown.records if r.name.startswith("psycopg")] == []
    debug = [r.getMessage() for r in kept.records if r.levelno == logging.DEBUG]
    assert any("psycopg.pool: discarding closed connection" in m for m in debug), debug
