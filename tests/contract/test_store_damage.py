"""Damage the store's checks missed: trial heads, a schema version, text that is not
UTF-8, a changed value comparing equal on resume, a copy into a store that differs."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from corral.cli import main

from .test_copy import BENCH


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("made")
    bench, store = folder / "ops.py", folder / "store.db"
    bench.write_text(BENCH)
    assert invoke(["run", str(bench), "--store", str(store), "--no-progress"]).exit_code == 1
    return bench, store


def fresh(made: tuple[Path, Path], folder: Path) -> Path:
    store = folder / "store.db"
    shutil.copy(made[1], store)
    return store


def sql(store: Path, statement: str) -> None:
    with closing(sqlite3.connect(store)) as db, db:
        assert db.execute(statement).rowcount > 0


HEAD_DAMAGE = {
    "status unknown": "status = 'exploded'",
    "done without a status": "status = NULL, done = 1",
    "working_time text": "working_time = 'x'",
    "passed not a boolean": "passed = 5",
    "done not a boolean": "done = 7",
    "trial negative": "trial = -1",
    "input_tokens negative": "input_tokens = -5",
}


@pytest.mark.parametrize("damage", list(HEAD_DAMAGE))
@pytest.mark.parametrize("command", ["report", "run"])
def test_a_damaged_trial_head_is_one_error_line(
    made: tuple[Path, Path], tmp_path: Path, damage: str, command: str
) -> None:
    store = fresh(made, tmp_path)
    sql(store, f"UPDATE trial_heads SET {HEAD_DAMAGE[damage]} WHERE task_id = 'even' AND trial = 0")
    args = {
        "report": ["report", "ops", "--store", str(store)],
        "run": ["run", str(made[0]), "--store", str(store), "--no-progress"],
    }[command]
    result = invoke(args)
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and "is corrupt" in lines[-1], result.stderr


def test_a_schema_version_of_non_ascii_digits_is_one_error_line(
    made: tuple[Path, Path], tmp_path: Path
) -> None:
    store = fresh(made, tmp_path)
    sql(store, "UPDATE meta SET value = '\u00b2' WHERE key = 'schema_version'")  # '²'.isdigit()
    result = invoke(["report", "ops", "--store", str(store)])
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    assert "schema version" in result.stderr and str(store) in result.stderr


# -- a changed configuration on resume ---------------------------------------------

import corral  # noqa: E402
from corral import BenchmarkTaskMetadata as Meta  # noqa: E402
from corral.testing import FakeEnvironment, ScriptedAgent, json_edit, tamper  # noqa: E402


async def _run_twice(path: Path, first: Meta, second: Meta) -> None:
    for meta in (first, second):
        runner = corral.CorralRunner(
            {"t": meta}, {"a": ScriptedAgent()}, {"e": FakeEnvironment()}, store=path
        )
        await runner.run("b")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "first, second",
    [
        (Meta("a", "e", target=0), Meta("a", "e", target=False)),
        (Meta("a", "e", inputs={"x": 1}), Meta("a", "e", inputs={"x": True})),
    ],
    ids=["target 0 -> false", "input 1 -> true"],
)
async def test_a_value_changed_to_an_equal_comparing_bool_is_refused(
    tmp_path: Path, first: Meta, second: Meta
) -> None:
    with pytest.raises(corral.ConfigError, match="different configuration"):
        await _run_twice(tmp_path / "s.db", first, second)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "second, named",
    [
        (Meta("a", "e", target="x"), "target"),
        (Meta("a", "e", metadata={"level": 2}), "metadata"),
    ],
)
async def test_a_field_added_on_resume_is_named(tmp_path: Path, second: Meta, named: str) -> None:
    with pytest.raises(corral.ConfigError) as caught:
        await _run_twice(tmp_path / "s.db", Meta("a", "e"), second)
    assert f"task 't' {named} was" in str(caught.value), str(caught.value)


# -- corral copy into a store that already has the benchmark ------------------------

from corral import Commit, MemoryStore, TrialKey  # noqa: E402


@pytest.mark.anyio
async def test_copy_refuses_a_destination_with_a_trial_the_source_lacks(tmp_path: Path) -> None:
    """Each destination trial's history must be a prefix of the source's (the
    docstring); one the source does not have at all is not, so the copy must not
    report "verified" while the two stores give different reports."""
    source, destination = MemoryStore(), corral.SQLiteStore(tmp_path / "d.db")
    config = {"trials_per_task": 2, "tasks": {"t": {"agent_id": "a", "environment_id": "e"}}}
    terminal = {"status": "completed", "output": 1, "attempts": 1, "state": None}
    for store, trials in ((source, (0,)), (destination, (0, 1))):
        async with store.opened():
            await store.register_benchmark("b", config)
            for trial in trials:
                key = TrialKey("b", "t", trial)
                await store.append(key, [Commit(0, "setup", {"state": None}, 1.0)])
                await store.append(key, [Commit(1, "terminal", terminal, 2.0)])
    with pytest.raises(corral.ConfigError, match="'b' is in the destination with other commits"):
        await corral.copy_benchmarks(source, destination)


@pytest.mark.parametrize(
    "statement, command",
    [
        (
            "UPDATE commits SET payload = CAST(x'7b22ff22' AS TEXT) "
            "WHERE task_id = 'even' AND trial = 1 AND kind = 'terminal'",
            "show",
        ),
        (
            "UPDATE trial_heads SET error = CAST(x'ff' AS TEXT) "
            "WHERE task_id = 'even' AND trial = 1",
            "view",
        ),
    ],
    ids=["payload not UTF-8 / show", "head error not UTF-8 / view"],
)
def test_text_that_is_not_utf8_is_a_corrupt_store(
    made: tuple[Path, Path], tmp_path: Path, statement: str, command: str
) -> None:
    store = fresh(made, tmp_path)
    sql(store, statement)
    args = {
        "show": ["show", "ops", "even", "1", "--store", str(store)],
        "view": ["view", "--store", str(store), "--export", "ops", "-o", str(tmp_path / "o.html")],
    }[command]
    result = invoke(args)
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and "is corrupt" in line and str(store) in line


# -- a commit deleted from the middle of a trial's history --------------------------

GAP_COMMANDS = {
    "report --json": ["report", "ops", "--json"],
    "show": ["show", "ops", "even", "0"],
    "view": ["view", "--export", "ops", "-o", "{tmp}/o.html"],
    "copy": ["copy", "{store}", "{tmp}/copy.db"],
    "run": ["run", "{bench}", "--no-progress"],
}


def _gap_args(name: str, store: str, bench: Path, tmp_path: Path) -> list[str]:
    args = [a.format(store=store, bench=bench, tmp=tmp_path) for a in GAP_COMMANDS[name]]
    return args if name == "copy" else [*args, "--store", store]


def _cut_even_0(delete: Any) -> None:
    """Commit 1 of trial 0 of 'even' deleted, and its end (a resume reads it again)."""
    delete("DELETE FROM {commits} WHERE task_id = 'even' AND trial = 0 AND seq = 1")
    delete(
        "DELETE FROM {commits} WHERE task_id = 'even' AND trial = 0 "
        "AND kind IN ('terminal', 'evaluation')"
    )


@pytest.mark.parametrize("command", list(GAP_COMMANDS))
def test_a_commit_missing_from_a_trials_history_is_one_error_line(
    made: tuple[Path, Path], tmp_path: Path, command: str
) -> None:
    """A trial's commits are numbered 0, 1, 2... with no gap; one missing was deleted
    behind Corral's back, and reading around it would report (or resume, or copy) a
    history that was never recorded."""
    store = fresh(made, tmp_path)
    _cut_even_0(lambda statement: sql(store, statement.format(commits="commits")))
    before = _commits(store)
    result = invoke(_gap_args(command, str(store), made[0], tmp_path))
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line == (
        f"error: benchmark 'ops' in store {str(store)!r} is corrupt: task 'even' trial 0 "
        "has no commit 1, though it has commit 2"
    ), result.stderr
    assert _commits(store) == before
    assert not (tmp_path / "copy.db").exists() or not _commits(tmp_path / "copy.db")


def _commits(store: Path) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(store)) as db:
        return db.execute("SELECT * FROM commits ORDER BY task_id, trial, seq").fetchall()


@pytest.mark.parametrize("command", ["report --json", "show", "run"])
def test_a_commit_missing_from_a_postgres_trials_history_is_one_error_line(
    made: tuple[Path, Path], tmp_path: Path, pg_dsn: str, command: str
) -> None:
    import psycopg

    assert invoke(["copy", str(made[1]), pg_dsn]).exit_code == 0
    with psycopg.connect(pg_dsn) as conn:
        _cut_even_0(lambda statement: conn.execute(statement.format(commits="corral.commits")))
    result = invoke(_gap_args(command, pg_dsn, made[0], tmp_path))
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and line.endswith(
        "is corrupt: task 'even' trial 0 has no commit 1, though it has commit 2"
    ), result.stderr


# -- a JSON report is printed whole or not at all -----------------------------------


def test_report_json_of_a_damaged_store_prints_no_cut_document(
    made: tuple[Path, Path], tmp_path: Path
) -> None:
    """`report --json` reads each task's records as it writes them: damage in a later
    task ('odd', after 'even') must not leave the document begun on stdout."""
    store = fresh(made, tmp_path)
    sql(store, "UPDATE commits SET input_tokens = 'many' WHERE task_id = 'odd' AND seq = 1")
    result = invoke(["report", "ops", "--json", "--store", str(store)])
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "task 'odd' trial 0 commit 1" in line, line


# -- a JSON value where a reader looks a name up --------------------------------------


@pytest.mark.parametrize("status", [["completed"], {"completed": True}], ids=["list", "object"])
@pytest.mark.parametrize("command", ["report --json", "show", "view", "copy"])
def test_a_terminal_status_that_is_not_text_is_one_error_line(
    made: tuple[Path, Path], tmp_path: Path, status: object, command: str
) -> None:
    """A status that is a list or an object is no status (looking it up among the
    statuses raised TypeError: a traceback from every command that reads commits)."""
    store = fresh(made, tmp_path)
    tamper(store, "commits", "payload", json_edit(status=status), "kind = 'terminal'")
    result = invoke(_gap_args(command, str(store), made[0], tmp_path))
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and "its terminal payload has status" in line, line


# -- a trial's last commit deleted: its head says more than its commits ----------------

#: Which trial loses its last commit (its evaluation: the head still says it passed).
_CUT_END = "DELETE FROM {commits} WHERE task_id = 'even' AND trial = 0 AND kind = 'evaluation'"
_CUT_END_LINE = "is corrupt: task 'even' trial 0 has 4 commits, though its head was made from 5"


def test_a_trials_last_commit_deleted_is_one_error_line(
    made: tuple[Path, Path], tmp_path: Path
) -> None:
    """A report counts a trial from its head and lists its record from its commits:
    with its evaluation deleted the head still says it passed, and `report --json`
    printed 'even' as passed 3 times beside 2 trials' records. Corral never deletes
    a commit, so a trial with fewer commits than its head was made from is damage."""
    store = fresh(made, tmp_path)
    sql(store, _CUT_END.format(commits="commits"))
    result = invoke(["report", "ops", "--json", "--store", str(store)])
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    line = result.stderr.strip().splitlines()[-1]
    assert line == f"error: benchmark 'ops' in store {str(store)!r} {_CUT_END_LINE}", line


@pytest.mark.parametrize("command", ["show", "view"])
def test_a_trials_last_commit_deleted_is_one_error_line_where_its_commits_are_shown(
    made: tuple[Path, Path], tmp_path: Path, command: str
) -> None:
    """`show` and the viewer's trial page show a trial's commits beside what its head
    says (the viewer's row: passed, 5 commits) and the report built from the heads:
    with the commits the head counted gone, both are damage, as `report --json` says."""
    store = fresh(made, tmp_path)
    sql(store, _CUT_END.format(commits="commits"))
    result = invoke(_gap_args(command, str(store), made[0], tmp_path))
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line == f"error: benchmark 'ops' in store {str(store)!r} {_CUT_END_LINE}", line
    assert not (tmp_path / "o.html").exists()


@pytest.mark.parametrize("cut", ["its evaluation", "every commit"])
def test_a_copy_of_a_trial_whose_last_commits_were_deleted_is_refused(
    made: tuple[Path, Path], tmp_path: Path, cut: str
) -> None:
    """The copy's heads are made from the commits copied: it would report the trial
    unscored (or not at all) where the source's report counts it passed, and say
    "verified". Refused before anything is written."""
    store = fresh(made, tmp_path)
    statement = _CUT_END if cut == "its evaluation" else _CUT_END.split(" AND kind")[0]
    sql(store, statement.format(commits="commits"))
    result = invoke(_gap_args("copy", str(store), made[0], tmp_path))
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    has = "4 commits" if cut == "its evaluation" else "0 commits"
    assert line == (
        f"error: benchmark 'ops' in store {str(store)!r} is corrupt: task 'even' trial 0 "
        f"has {has}, though its head was made from 5"
    ), line
    assert not (tmp_path / "copy.db").exists() or not _commits(tmp_path / "copy.db")


@pytest.mark.parametrize("command", ["report --json", "show"])
def test_a_postgres_trials_last_commit_deleted_is_one_error_line(
    made: tuple[Path, Path], tmp_path: Path, pg_dsn: str, command: str
) -> None:
    import psycopg

    assert invoke(["copy", str(made[1]), pg_dsn]).exit_code == 0
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(_CUT_END.format(commits="corral.commits"))
    result = invoke(_gap_args(command, pg_dsn, made[0], tmp_path))
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and line.endswith(_CUT_END_LINE), result.stderr


@pytest.mark.anyio
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_head_behind_its_trials_commits_is_no_damage(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """A head is behind its trial's commits while the trial runs (work after a reopen
    changes no head) or while a writer appends after the head was read: only a head
    ahead of its commits is damage."""
    from corral.history import encode, reopen, terminal
    from corral.store import open_store

    address = str(tmp_path / "s.db") if backend == "sqlite" else request.getfixturevalue("pg_dsn")
    config = {"trials_per_task": 1, "tasks": {"t": {"agent_id": "a", "environment_id": "e"}}}
    ended = encode(terminal(corral.TrialStatus.ERROR, attempts=1, failure={"error": "boom"}))
    store, key = open_store(address), TrialKey("b", "t", 0)
    async with store.opened():
        await store.register_benchmark("b", config)
        await store.append(key, [Commit(0, "setup", {"state": None}, 1.0)])
        await store.append(key, [Commit(1, "terminal", ended, 2.0)])
        reopened = encode(reopen(corral.TrialStatus.ERROR))
        await store.append(key, [Commit(2, "reopen", reopened, 3.0)])
        await store.append(key, [Commit(3, "setup", {"state": None}, 4.0)])
        heads = [h async for chunk in store.heads("b") for h in chunk]  # type: ignore[attr-defined]
        # Made at the reopen, of the earlier attempt (counted until the new one ends).
        assert [(h.next_seq, h.done) for h in heads] == [(3, True)]
        (summary,) = await store.task_summaries("b", ["t"])  # type: ignore[attr-defined]
        assert summary.next_seq == 4 and summary.terminal is None
        # A writer appending between the reads of the heads and of the commits (the
        # heads are read first: a head read second could be ahead of the commits).
        reader = open_store(address, read_only=True)
        async with reader.opened():
            read, reads = reader._read, []  # type: ignore[attr-defined]
            landing = [
                Commit(4, "terminal", ended, 5.0),
                Commit(5, "reopen", reopened, 6.0),
            ]

            async def racing(sql: str, params: Any) -> Any:
                rows = await read(sql, params)
                reads.append(sql)
                if len(reads) % 2:  # a head and its commit land after each first read
                    await store.append(key, [landing.pop(0)])
                return rows

            reader._read = racing  # type: ignore[attr-defined]
            (summary,) = await reader.task_summaries("b", ["t"])  # type: ignore[attr-defined]
            assert summary.next_seq == 5 and summary.terminal is not None
            # As `show` and the viewer read a trial's commits beside its head.
            assert len(await reader.checked_history(key)) == 6  # type: ignore[attr-defined]
            assert not landing
