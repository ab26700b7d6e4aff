"""A store changed behind Corral's back: every corruption of every column, read by every
command, is one ``error:`` line and exit 2 (never a traceback, never a hang); and the
same on PostgreSQL for the main cases."""

from __future__ import annotations

import shutil
import sqlite3
import tracemalloc
from contextlib import closing
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner, Result

import corral
from corral import StoreCorrupt, TrialRecord, TrialStatus
from corral._records import TrialTable
from corral.cli import main
from corral.report import build_report
from corral.store._decode import MAX_TRIALS_PER_TASK
from corral.testing import CORRUPTIONS, DELETE, FakeEnvironment, ScriptedAgent, json_edit, tamper

from ..support import pg
from .test_copy import BENCH

pg_dsn = pg.pg_dsn

COMMANDS = ("list", "report", "show", "compare", "rescore", "run", "copy", "view")

# What a command never reads, it cannot notice: `show` reads one trial (even 1), and
# only commands that read whole histories read a finished trial's setup.
UNSEEN = {
    *((name, "show") for name in ("task_id blob", "trial text", "trial negative", "trial huge")),
    *(
        (name, command)
        for name in (
            "setup previous_trial text",
            "payload with NaN",
            "action turn text",
            "tool_effect action_seq negative",
        )
        for command in ("list", "report", "compare", "rescore", "run")
    ),
    # A report, a list and a comparison read each trial's head, never its commits (the
    # store wrote the heads from them), and of the configuration only the task ids,
    # models and environments (`corral report --json` and `show` read the commits).
    *(
        (name, command)
        for name, corruption in CORRUPTIONS.items()
        if corruption.table == "commits"
        or name in ("task agent_id list", "task max_iterations text")
        for command in ("list", "report", "compare")
    ),
    # Nor a benchmark's creation time (``list`` shows it). (The viewer reads the trials
    # whose heads it lists, by their keys: a trial whose commits moved to another key
    # has fewer than its head was made from, which it says.)
    *(
        (name, command)
        for name in CORRUPTIONS
        if name.startswith("benchmark created_at")
        for command in ("report", "compare")
    ),
    # Run records are read by what reports a benchmark (report, compare, rescore, the
    # viewer), by list (their tags) and by copy; a run only appends one.
    *(
        (name, command)
        for name in ("run record not JSON", "run record not a record")
        for command in ("show", "run")
    ),
}


def arguments(command: str, store: str, bench: Path, tmp_path: Path) -> list[str]:
    return {
        "list": ["list", "--store", store],
        "report": ["report", "ops", "--store", store],
        "show": ["show", "ops", "even", "1", "--store", store],
        "compare": ["compare", "ops", "ops", "--store", store],
        "rescore": ["rescore", "ops", str(bench), "--store", store, "--no-progress"],
        "run": ["run", str(bench), "--store", store, "--no-progress"],
        "copy": ["copy", store, str(tmp_path / "copy.db")],
        "view": ["view", "--store", store, "--export", "ops", "-o", str(tmp_path / "ops.html")],
    }[command]


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def recorded(store: Path) -> list[tuple[object, ...]]:
    """Every benchmark and commit the store holds."""
    with closing(sqlite3.connect(store)) as db:
        return [
            *db.execute("SELECT * FROM benchmarks ORDER BY benchmark_id"),
            *db.execute("SELECT * FROM commits ORDER BY benchmark_id, task_id, trial, seq"),
        ]


def one_error_line(result: Result) -> str:
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, int]]:
    """A store with a finished benchmark (errors, dependencies, usage, evaluations), and
    each command's exit code on it untouched."""
    folder = tmp_path_factory.mktemp("made")
    bench, store = folder / "ops.py", folder / "store.db"
    bench.write_text(BENCH)
    assert invoke(["run", str(bench), "--store", str(store), "--no-progress"]).exit_code == 1
    clean = {}
    for command in COMMANDS:
        copy = folder / f"{command}.db"
        shutil.copy(store, copy)
        clean[command] = invoke(arguments(command, str(copy), bench, folder)).exit_code
    return bench, store, clean


def fresh(made: tuple[Path, Path, dict[str, int]], folder: Path) -> tuple[Path, Path]:
    """(benchmark file, a copy of the made store in ``folder``)."""
    bench, original, _ = made
    store = folder / "store.db"
    shutil.copy(original, store)
    return bench, store


@pytest.mark.slow  # every corruption x every command: 400 CLI runs
@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("corruption", list(CORRUPTIONS))
def test_a_corrupt_store_is_one_error_line_for_every_command(
    made: tuple[Path, Path, dict[str, int]], tmp_path: Path, corruption: str, command: str
) -> None:
    bench, store = fresh(made, tmp_path)
    assert CORRUPTIONS[corruption].apply(store) > 0
    result = invoke(arguments(command, str(store), bench, tmp_path))
    if (corruption, command) in UNSEEN:
        assert "Traceback" not in result.output
        assert result.exit_code == made[2][command], result.output
        return
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert "ops" in line or str(store) in line


def test_the_error_names_the_benchmark_trial_commit_and_what_is_wrong(
    made: tuple[Path, Path, dict[str, int]], tmp_path: Path
) -> None:
    _, store = fresh(made, tmp_path)
    tamper(store, "commits", "input_tokens", "many", "task_id = 'odd' AND trial = 1 AND seq = 1")
    line = one_error_line(invoke(["report", "ops", "--json", "--store", str(store)]))
    assert line == (
        f"error: benchmark 'ops' in store {str(store)!r} is corrupt: task 'odd' trial 1 "
        "commit 1: its input_tokens 'many' is not a non-negative integer"
    )


@pytest.mark.anyio
async def test_a_huge_trials_per_task_is_refused_when_read_not_walked(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = corral.SQLiteStore(path)
    config = {"trials_per_task": 3, "tasks": {"t": {"agent_id": "a", "environment_id": "e"}}}
    async with store.opened():
        await store.register_benchmark("b", config)
    tamper(path, "benchmarks", "config", json_edit(trials_per_task=10**12))
    with anyio.fail_after(5):
        reader = corral.SQLiteStore(path, read_only=True)
        async with reader.opened():
            with pytest.raises(StoreCorrupt, match=f"1..{MAX_TRIALS_PER_TASK:,}"):
                await reader.benchmark_config("b")
            # A removed key is a corruption too.
            tamper(path, "benchmarks", "config", json_edit(trials_per_task=DELETE))
            with pytest.raises(StoreCorrupt, match="trials_per_task is missing"):
                await reader.benchmarks()


def test_a_run_stops_at_an_unfinished_trial_whose_history_is_corrupt(
    made: tuple[Path, Path, dict[str, int]], tmp_path: Path
) -> None:
    bench, store = fresh(made, tmp_path)
    with closing(sqlite3.connect(store)) as db, db:  # even 0 lost its end: a resume runs it
        db.execute(
            "DELETE FROM commits WHERE task_id = 'even' AND trial = 0 "
            "AND kind IN ('terminal', 'evaluation')"
        )
    tamper(store, "commits", "payload", json_edit(turn="x"), "kind = 'action'")
    before = recorded(store)
    result = invoke(arguments("run", str(store), bench, tmp_path))
    assert result.exit_code == 2 and "Traceback" not in result.output
    resuming, line = result.stderr.strip().splitlines()
    assert resuming == "resuming ops: 8 of 9 trials done"
    assert "task 'even' trial 0 commit 1: its action payload has turn 'x'" in line
    assert recorded(store) == before


def test_a_run_refuses_more_trials_per_task_than_a_store_reads_back() -> None:
    runner = corral.CorralRunner(
        {"t": corral.BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent()},
        {"e": FakeEnvironment()},
        store=corral.MemoryStore(),
    )
    runner.prepare(trials_per_task=MAX_TRIALS_PER_TASK)
    with pytest.raises(corral.ConfigError, match="at most 1,000,000, not 1000001"):
        runner.prepare(trials_per_task=MAX_TRIALS_PER_TASK + 1)


# -- PostgreSQL: the same decoding, the main cases ---------------------------------

PG_CASES = (
    "config not JSON",
    "trials_per_task text",
    "trials_per_task huge",
    "task not an object",
    "benchmark created_at huge",
    "payload not JSON",
    "terminal status unknown",
    "evaluation score text",
    "created_at infinite",
    "input_tokens negative",
    "cost infinite",
)


@pytest.mark.slow
def test_a_corrupt_postgres_store_is_one_error_line(
    made: tuple[Path, Path, dict[str, int]], tmp_path: Path, pg_dsn: str
) -> None:
    bench, local = fresh(made, tmp_path)
    assert invoke(["copy", str(local), pg_dsn]).exit_code == 0
    for name in PG_CASES:
        assert CORRUPTIONS[name].sql_types
        _restore_pg(pg_dsn, local)
        CORRUPTIONS[name].apply(pg_dsn)
        for command in ("list", "report", "show", "run", "copy", "view"):
            result = invoke(arguments(command, pg_dsn, bench, tmp_path))
            if (name, command) in UNSEEN:  # as on SQLite: this command never reads it
                assert "Traceback" not in result.output, (name, command)
                continue
            assert result.exit_code == 2, (name, command, result.output)
            assert "is corrupt" in one_error_line(result), (name, command)


def _restore_pg(dsn: str, local: Path) -> None:
    """The database as the local store has it (the previous case's damage undone)."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        conn.execute("DELETE FROM corral.commits")
        conn.execute("DELETE FROM corral.runs")
        conn.execute("DELETE FROM corral.benchmarks")
    (local.parent / "copy.db").unlink(missing_ok=True)
    assert invoke(["copy", str(local), dsn]).exit_code == 0


# -- a stored count never makes a reader walk (or allocate) it -----------------------


class Unwalkable(dict[tuple[str, int], TrialRecord]):
    """Records that fail a report looking trials up one by one (10**6 lookups would
    mean a report walking trials_per_task, not the records)."""

    def __contains__(self, key: object) -> bool:
        raise AssertionError(f"looked up {key!r}: the report walked trials_per_task")


def test_a_report_scales_with_the_records_not_trials_per_task() -> None:
    records = Unwalkable(
        {("t", r): TrialRecord("t", r, TrialStatus.COMPLETED, started_at=1.0) for r in (0, 7)}
    )
    config = {"trials_per_task": MAX_TRIALS_PER_TASK, "tasks": {"t": {}, "u": {}}}
    report = build_report("b", config, records=records, k_values=(1,))
    assert [t.trial for t in report.tasks["t"].trials] == [0, 7]
    assert report.tasks["u"].trials == []
    assert report.counts["unfinished"] == 2 * MAX_TRIALS_PER_TASK - 2


def test_a_trial_table_holds_what_was_added_not_trials_per_task() -> None:
    tracemalloc.start()
    try:
        table = TrialTable(MAX_TRIALS_PER_TASK)
        table.add(TrialRecord("t", 3, TrialStatus.COMPLETED))
        size, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size < 100_000  # a row of 10**6 slots would be 8 MB
    assert table.trials("t") == [table[("t", 3)]] and len(table) == 1
    with pytest.raises(IndexError):
        table.add(TrialRecord("t", MAX_TRIALS_PER_TASK, TrialStatus.COMPLETED))


def test_a_damaged_postgres_schema_version_is_one_error_line(
    made: tuple[Path, Path, dict[str, int]], tmp_path: Path, pg_dsn: str
) -> None:
    import psycopg

    bench, local = fresh(made, tmp_path)
    assert invoke(["copy", str(local), pg_dsn]).exit_code == 0
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("UPDATE corral.meta SET value = 'two' WHERE key = 'schema_version'")
    for command in ("list", "report", "run"):
        result = invoke(arguments(command, pg_dsn, bench, tmp_path))
        assert result.exit_code == 2, (command, result.output)
        assert "schema version 'two' is not a version number" in one_error_line(result)
