"""`corral copy` / `copy_benchmarks`: SQLite -> PostgreSQL -> SQLite, verified, resumable;
and the CLI pointed at a database by --store or CORRAL_STORE."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import corral
from corral import Commit, MemoryStore, TrialKey
from corral.cli import main
from corral.testing import tamper

from ..support import pg

pg_dsn = pg.pg_dsn  # a database of each test's own

BENCH = """
import corral
from corral import Action, BenchmarkTaskMetadata as Meta, Evaluation, Final, ToolEffect

class Agent:
    async def act(self, session):
        session.record_usage(input_tokens=7, output_tokens=1, cost=0.25)
        if not session.steps:
            return Action("double", {"x": session.trial})
        if session.task_id == "odd" and session.trial % 2:
            raise RuntimeError("odd trial")
        return Final(session.steps[-1].effect.observation)

class Env:
    async def setup(self, session):
        return {"n": 0}
    async def execute(self, action, session):
        return ToolEffect(2 * action.arguments["x"], state={"n": session.state["n"] + 1})
    async def evaluate(self, trial):
        return Evaluation(1.0, trial.output == 2 * trial.trial)

benchmark = corral.Benchmark(
    tasks={"even": Meta("a", "e"), "odd": Meta("a", "e"),
           "child": Meta("a", "e", dependencies=("odd",))},
    agents={"a": Agent()},
    environments={"e": Env()},
    run_defaults={"trials_per_task": 3, "k_values": (1, 3), "max_retries": 0},
)
"""


def invoke(*args: Any, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def report(store: str) -> dict[str, Any]:
    result = invoke("report", "ops", "--store", store, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    return {k: data[k] for k in ("pass_at_k", "counts", "usage", "errors", "finished", "total")}


def test_copy_sqlite_to_postgres_and_back(tmp_path: Path, pg_dsn: str) -> None:
    bench, local = tmp_path / "ops.py", str(tmp_path / "store.db")
    bench.write_text(BENCH)
    assert invoke("run", bench, "--store", local, "--no-progress").exit_code == 1  # errors

    copied = invoke("copy", local, pg_dsn)
    assert copied.exit_code == 0, copied.output
    assert copied.output == "copied ops: 9 trials, 40 commits (40 new), verified\n"
    assert report(pg_dsn) == report(local)
    listed = invoke("list", "--store", pg_dsn).output
    assert "ops" in listed

    # Again: nothing new. Then the fix is run on Postgres itself, via CORRAL_STORE.
    assert "(0 new)" in invoke("copy", local, pg_dsn).output
    fixed = invoke(
        "run", bench, "--no-progress", "--rerun", "unreachable", env={"CORRAL_STORE": pg_dsn}
    )
    assert fixed.exit_code == 1  # the odd trial still errors; its child stays unreachable
    shown = invoke("show", "ops", "odd", "1", env={"CORRAL_STORE": pg_dsn})
    assert shown.exit_code == 0 and "RuntimeError: odd trial" in shown.output

    back = str(tmp_path / "back.db")
    assert invoke("copy", pg_dsn, back).exit_code == 0
    assert report(back) == report(pg_dsn)
    # The local store has fewer commits than Postgres now: copying it again is refused.
    refused = invoke("copy", local, pg_dsn)
    assert refused.exit_code == 2 and "with other commits" in refused.output


@pytest.mark.anyio
async def test_copy_refuses_a_different_history_and_writes_nothing(tmp_path: Path) -> None:
    source, destination = MemoryStore(), corral.SQLiteStore(tmp_path / "d.db")
    config = {"trials_per_task": 1, "tasks": {"t": {"agent_id": "a", "environment_id": "e"}}}
    for store, output in ((source, "yes"), (destination, "no")):
        async with store.opened():
            await store.register_benchmark("b", config)
            key = TrialKey("b", "t", 0)
            await store.append(key, [Commit(0, "setup", {"state": None}, 1.0)])
            terminal = {"status": "completed", "output": output, "attempts": 1, "state": None}
            await store.append(key, [Commit(1, "terminal", terminal, 2.0)])
    with pytest.raises(corral.ConfigError, match="'b' is in the destination with other commits"):
        await corral.copy_benchmarks(source, destination)
    with pytest.raises(corral.ConfigError, match="no benchmark 'nope'"):
        await corral.copy_benchmarks(source, destination, ["nope"])
    db = sqlite3.connect(tmp_path / "d.db")
    assert db.execute("SELECT COUNT(*) FROM commits").fetchone()[0] == 2


@pytest.mark.anyio
async def test_copy_refuses_a_destination_whose_benchmark_has_more_tasks(tmp_path: Path) -> None:
    """The destination's benchmark has a task the source's lacks (and no trial of it): a
    run of some tasks is the same benchmark to a runner, so the copy merged and said
    "verified", and the copy reported a task its source never had."""
    task = {"agent_id": "a", "environment_id": "e"}
    source, destination = MemoryStore(), corral.SQLiteStore(tmp_path / "d.db")
    key = TrialKey("b", "t", 0)
    async with source.opened():
        await source.register_benchmark("b", {"trials_per_task": 1, "tasks": {"t": task}})
        await source.append(key, [Commit(0, "setup", {"state": None}, 1.0)])
    async with destination.opened():
        config = {"trials_per_task": 1, "tasks": {"t": task, "u": task}}
        await destination.register_benchmark("b", config)
    with pytest.raises(corral.ConfigError, match="'b' is in the destination with another con"):
        await corral.copy_benchmarks(source, destination)
    async with destination.opened():
        assert await destination.history(key) == []  # nothing written
        stored = await destination.benchmark_config("b")
        assert stored is not None and sorted(stored["tasks"]) == ["t", "u"]


@pytest.mark.anyio
async def test_copy_keeps_creation_times_on_every_backend(tmp_path: Path, pg_dsn: str) -> None:
    source_path = tmp_path / "s.db"
    source = corral.SQLiteStore(source_path)
    key = TrialKey("b", "t", 0)
    async with source.opened():
        config = {"trials_per_task": 1, "tasks": {"t": {"environment_id": "e"}}}
        await source.register_benchmark("b", config)
        await source.append(key, [Commit(0, "setup", {"state": None}, 1_600_000_000.5)])
    tamper(source_path, "benchmarks", "created_at", 1_500_000_000.25)  # made long ago
    destinations = [corral.SQLiteStore(tmp_path / "d.db"), corral.PostgresStore(pg_dsn)]
    for destination in [*destinations, MemoryStore()]:
        await corral.copy_benchmarks(source, destination)
        async with destination.opened():
            (info,) = await destination.benchmarks()
            history = await destination.history(key)
        assert info.created_at == 1_500_000_000.25, destination
        assert [c.created_at for c in history] == [1_600_000_000.5]
    # And on from a copy: PostgreSQL -> SQLite.
    again = corral.SQLiteStore(tmp_path / "again.db")
    await corral.copy_benchmarks(destinations[1], again)
    async with again.opened():
        assert [b.created_at for b in await again.benchmarks()] == [1_500_000_000.25]
