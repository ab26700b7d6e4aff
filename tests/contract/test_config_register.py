"""Registering a configuration given as a stream, on every backend: stored as the whole
dict would be, compared in pieces with the same verdicts and messages."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from corral import CommitStore, ConfigError, MemoryStore, PostgresStore, SQLiteStore, StoreCorrupt
from corral.history import ConfigStream

from ..support import pg

pytestmark = pytest.mark.anyio

pg_dsn = pg.pg_dsn
N = 3000  # several pieces of text


def _entry(i: int, **changes: Any) -> dict[str, Any]:
    entry = {"agent_id": "a", "environment_id": "e", "model": None, "max_iterations": 10}
    entry.update(dependencies=[], inputs={"n": i, "prompt": "é" * (i % 40)}, **changes)
    return entry


def _tasks(ids: list[str]) -> dict[str, Any]:
    return {t: _entry(int(t.split("-")[1])) for t in ids}


IDS = [f"task-{i:05d}" for i in range(N)]
CONFIG = {"trials_per_task": 2, "tasks": _tasks(IDS)}


def _stream(tasks: dict[str, Any], trials: int = 2) -> ConfigStream:
    return ConfigStream(trials, tasks.items)


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CommitStore]:
    made: CommitStore
    if request.param == "postgres":
        made = PostgresStore(request.getfixturevalue("pg_dsn"))
    elif request.param == "sqlite":
        made = SQLiteStore(tmp_path / "s.db")
    else:
        made = MemoryStore()
    async with made.opened():
        yield made


async def test_a_streamed_configuration_is_stored_and_compared(store: CommitStore) -> None:
    assert await store.register_benchmark("b", _stream(CONFIG["tasks"])) is False
    assert await store.benchmark_config("b") == CONFIG
    assert await store.register_benchmark("b", _stream(CONFIG["tasks"])) is True
    assert await store.register_benchmark("b", CONFIG) is True  # the whole dict too
    # Some of the tasks, in their order or not: the same benchmark.
    assert await store.register_benchmark("b", _stream(_tasks(IDS[100:2000:7]))) is True
    assert await store.register_benchmark("b", _stream(_tasks(IDS[::-3]))) is True
    changed = _tasks(IDS)
    changed["task-02500"] = _entry(2500, max_iterations=3)
    with pytest.raises(ConfigError, match="task 'task-02500' max_iterations was 10, now 3"):
        await store.register_benchmark("b", _stream(changed))
    with pytest.raises(ConfigError, match="task 'x-99999' was not in it"):
        await store.register_benchmark("b", _stream({**_tasks(IDS[:5]), **_tasks(["x-99999"])}))
    with pytest.raises(ConfigError, match="trials_per_task was 2, now 3"):
        await store.register_benchmark("b", _stream(_tasks(IDS[:5]), trials=3))
    assert await store.benchmark_config("b") == CONFIG


def _write_row(path: Path, text: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute("UPDATE benchmarks SET config = ? WHERE benchmark_id = 'b'", (text,))


async def test_a_configuration_written_by_earlier_code_compares(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    async with store.opened():
        await store.register_benchmark("b", CONFIG)
    # Spaces and another key order, as another writer may have left them.
    _write_row(path, json.dumps({"tasks": CONFIG["tasks"], "trials_per_task": 2}, indent=1))
    async with store.opened():
        assert await store.register_benchmark("b", _stream(_tasks(IDS[10:20]))) is True
        with pytest.raises(ConfigError, match="trials_per_task was 2, now 1"):
            await store.register_benchmark("b", _stream(_tasks(IDS[10:20]), trials=1))


async def test_a_damaged_stored_task_is_corrupt_even_if_not_run(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = SQLiteStore(path)
    async with store.opened():
        await store.register_benchmark("b", CONFIG)
    damaged = {**CONFIG["tasks"], "task-02999": {"agent_id": "a"}}
    _write_row(path, json.dumps({"trials_per_task": 2, "tasks": damaged}))
    async with store.opened():
        with pytest.raises(StoreCorrupt, match="task 'task-02999' has no environment_id"):
            await store.register_benchmark("b", _stream(_tasks(IDS[:3])))
    _write_row(path, json.dumps({"trials_per_task": 2, "tasks": CONFIG["tasks"]})[:-5])
    async with store.opened():
        with pytest.raises(StoreCorrupt, match="not JSON"):
            await store.register_benchmark("b", _stream(_tasks(IDS[:3])))
