"""What a report needs beyond the trials lives in the store, on every backend: the
tasks the dependency closure added, the trials a run reused, its budgets and timings.
The report file is an export the runner writes where it is asked to."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

import corral
from corral import (
    BenchmarkReport,
    BenchmarkTaskMetadata,
    CommitStore,
    CorralRunner,
    Evaluation,
    Final,
    TrialRecord,
)
from corral.cli import main
from corral.cli._inspect import rebuild_report
from corral.report._files import report_path
from corral.store import copy_benchmarks, open_store
from corral.store._runs import RunRecord

from ..support import pg
from ..support.scripted import scripted_runner

pg_dsn = pg.pg_dsn

V1_STORE = Path(__file__).parents[1] / "data" / "v1_store"

TASKS = {
    "parent": BenchmarkTaskMetadata("a", "e"),
    "child": BenchmarkTaskMetadata("a", "e", dependencies=("parent",)),
    "other": BenchmarkTaskMetadata("a", "e"),
}


def decide(s: corral.AgentSession) -> Final:
    s.record_usage(input_tokens=3, output_tokens=1, cost=0.5)
    return Final({"trial": s.trial})


def evaluate(r: TrialRecord) -> Evaluation:
    return Evaluation(float(r.trial != 1), r.trial != 1)


def runner(store: CommitStore | str | Path) -> CorralRunner:
    return scripted_runner(TASKS, decide, evaluate, store)


async def subset_run(store: CommitStore) -> BenchmarkReport:
    """The whole benchmark, then ``child`` alone: its parent is added, 4 trials reused."""
    await runner(store).run("b", trials_per_task=2)
    return await runner(store).run(
        "b", task_ids=["child"], trials_per_task=2, token_limit=1000, k_values=(1, 2)
    )


@pytest.fixture(params=["memory", "sqlite", "postgres"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[CommitStore]:
    if request.param == "postgres":
        yield open_store(request.getfixturevalue("pg_dsn"))
    elif request.param == "sqlite":
        yield open_store(tmp_path / "store.db")
    else:
        yield corral.MemoryStore()


async def reported(store: CommitStore, benchmark_id: str = "b") -> BenchmarkReport:
    async with store.opened():
        return await rebuild_report(store, benchmark_id)


@pytest.mark.anyio
async def test_the_store_alone_gives_a_subset_runs_report(store: CommitStore) -> None:
    ran = await subset_run(store)
    assert ran.added_by_dependencies == ["parent"] and ran.resumed == 4
    path = report_path(store, "b")
    if path is not None:
        path.unlink()  # the store alone must give the report
    rebuilt = await reported(store)
    assert sorted(rebuilt.tasks) == sorted(TASKS)  # the whole benchmark
    assert rebuilt.added_by_dependencies == ["parent"]
    assert rebuilt.resumed == ran.resumed
    assert rebuilt.budgets == ran.budgets == {"token_limit": 1000}
    assert rebuilt.timings == ran.timings and rebuilt.stopped is None
    assert [rebuilt.tasks[t].trials for t in ran.tasks] == [t.trials for t in ran.tasks.values()]


@pytest.mark.anyio
async def test_a_run_record_handed_over_again_is_recorded_once(store: CommitStore) -> None:
    """A store retries its own transient errors: a record whose first attempt landed
    (its acknowledgement lost with the connection) is sent again. Before, PostgreSQL
    then kept the run twice."""
    record = RunRecord("run", 1.5, 2.5, ("t",), counts={"completed": 1})
    later = replace(record, started=3.0, ended=4.0)
    async with store.opened():
        await store.register_benchmark("b", {"tasks": {}, "trials_per_task": 1})
        await store.record_run("b", record)
        await store.record_run("b", record)  # the retry of a call that landed
        await store.record_run("b", later)
        assert await store.runs("b") == [record, later]


def test_corral_report_on_postgresql_shows_what_a_subset_run_did(pg_dsn: str) -> None:
    ran = anyio.run(subset_run, open_store(pg_dsn))
    result = CliRunner().invoke(main, ["report", "b", "--store", pg_dsn, "--json"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["added_by_dependencies"] == ran.added_by_dependencies == ["parent"]
    assert shown["tasks"]["parent"]["added_by_dependencies"] is True
    assert shown["resumed"] == ran.resumed == 4
    assert shown["budgets"] == {"token_limit": 1000}


@pytest.mark.anyio
async def test_a_later_commit_hides_the_last_runs_own_figures() -> None:
    store = corral.MemoryStore()
    await subset_run(store)
    # A trial reopened and ended again by a run that never recorded itself: the record
    # no longer describes the store, so its reuse count and budgets are not shown; the
    # closure marks are. (Reopened alone, the trial counts its earlier attempt still.)
    key = corral.TrialKey("b", "child", 0)
    head = len(await store.history(key))
    reopen = {"reason": "rerun", "previous_status": "completed"}
    ended = {"status": "error", "output": None, "error": "boom", "attempts": 1, "state": None}
    await store.append(
        key,
        [
            corral.Commit(head, "reopen", reopen, 1.0),
            corral.Commit(head + 1, "terminal", ended, 1.5),
        ],
    )
    rebuilt = await reported(store)
    assert rebuilt.added_by_dependencies == ["parent"]
    assert (rebuilt.resumed, rebuilt.budgets) == (0, {})


@pytest.mark.anyio
async def test_a_rescore_keeps_the_last_runs_closure_marks(tmp_path: Path) -> None:
    store = open_store(tmp_path / "store.db")
    await subset_run(store)
    rescored = await runner(store).rescore("b", task_ids=["parent"])
    assert rescored.added_by_dependencies == ["parent"]
    rebuilt = await reported(store)
    assert rebuilt.added_by_dependencies == ["parent"]
    assert rebuilt.resumed == rescored.resumed
    path = report_path(store, "b")
    assert path is not None
    assert json.loads(path.read_text())["added_by_dependencies"] == ["parent"]


@pytest.mark.anyio
async def test_runs_are_recorded_in_order_with_their_kind() -> None:
    store = corral.MemoryStore()
    await subset_run(store)
    await runner(store).rescore("b")
    runs = await store.runs("b")
    assert [(r.kind, r.task_ids, r.added, r.resumed) for r in runs] == [
        ("run", ("parent", "child", "other"), (), 0),
        ("run", ("parent", "child"), ("parent",), 4),
        ("rescore", ("parent", "child", "other"), ("parent",), 0),
    ]
    assert runs[1].k_values == (1, 2) and runs[1].counts["completed"] == 4
    assert all(r.started <= r.ended for r in runs)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.anyio
async def test_a_store_written_before_run_records_reports_as_before(tmp_path: Path) -> None:
    # Made by Corral bee6a90 (tests/data/v1_store/make_v1_store.py): "child" alone
    # twice, so "parent" was added and the second run reused 4 trials.
    shutil.copytree(V1_STORE, tmp_path / "v1")
    path = tmp_path / "v1" / "store.db"
    before = _digest(path)
    old = await reported(open_store(path, read_only=True), "old")
    assert _digest(path) == before  # reading changes nothing
    assert old.added_by_dependencies == ["parent"] and old.resumed == 4
    assert old.budgets == {"token_limit": 1000} and old.counts["completed"] == 4
    # A writer adds the run records' table; every commit stays as it was.
    again = await runner(path).run("old", task_ids=["child"], trials_per_task=2)
    assert again.resumed == 4 and again.added_by_dependencies == ["parent"]
    (tmp_path / "v1" / "reports" / "old.json").unlink()
    now = await reported(open_store(path, read_only=True), "old")
    assert now.added_by_dependencies == ["parent"] and now.resumed == 4
    assert [t.trials for t in now.tasks.values()] == [t.trials for t in old.tasks.values()]


@pytest.mark.anyio
async def test_copy_copies_the_run_records(tmp_path: Path) -> None:
    source = corral.MemoryStore()
    ran = await subset_run(source)
    destination = open_store(tmp_path / "copy.db")
    await copy_benchmarks(source, destination)
    await copy_benchmarks(source, destination)  # again: nothing new, nothing doubled
    async with destination.opened():
        assert await destination.runs("b") == await source.runs("b")
    rebuilt = await reported(destination)
    assert (rebuilt.added_by_dependencies, rebuilt.resumed) == (["parent"], ran.resumed)


@pytest.mark.anyio
async def test_the_report_file_goes_where_it_is_asked_for_any_store(tmp_path: Path) -> None:
    target = tmp_path / "out" / "report.json"
    report = await runner(corral.MemoryStore()).run("b", report_file=target)
    assert json.loads(target.read_text()) == json.loads(json.dumps(report.to_dict()))
    sqlite = tmp_path / "store.db"
    await runner(sqlite).run("b", report_file=str(target))
    assert not (tmp_path / "reports").exists()  # asked elsewhere: only there
    await runner(sqlite).run("b")
    assert (tmp_path / "reports" / "b.json").is_file()  # by default, beside the store


@pytest.mark.anyio
@pytest.mark.parametrize("bad", ["", 7])
async def test_a_bad_report_file_is_refused_before_anything_is_written(
    tmp_path: Path, bad: Any
) -> None:
    for value in (bad, tmp_path):
        with pytest.raises(corral.ConfigError, match="report_file"):
            await runner(tmp_path / "store.db").run("b", report_file=value)
    assert not (tmp_path / "store.db").exists()


@pytest.mark.anyio
async def test_a_report_file_in_a_folder_that_cannot_be_made_is_refused_first(
    tmp_path: Path,
) -> None:
    """Before, the run ran every trial and failed as it wrote the file."""
    (tmp_path / "a_file").write_text("")
    with pytest.raises(corral.ConfigError, match="report file .*a_file.*folder"):
        await runner(tmp_path / "store.db").run("b", report_file=tmp_path / "a_file" / "r.json")
    assert not (tmp_path / "store.db").exists()


@pytest.mark.anyio
@pytest.mark.parametrize("default", [False, True])
async def test_a_report_folder_that_is_a_broken_link_is_refused_first(
    tmp_path: Path, default: bool
) -> None:
    """A folder of the report file that is a link to nothing (a share not mounted) was
    passed over for the folder above it, which took the probe; the run ran every trial
    and failed at the end, as no folder can be made where the link is."""
    (tmp_path / "reports").symlink_to(tmp_path / "unmounted")
    store = tmp_path / "store.db"
    report_file = None if default else tmp_path / "reports" / "r.json"
    with pytest.raises(corral.ConfigError, match="report file .*reports.* is not a folder"):
        await runner(store).run("b", report_file=report_file)
    assert not store.exists()


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["run", "rescore"])
async def test_a_report_file_where_no_file_can_be_made_is_refused_first(
    tmp_path: Path, kind: str
) -> None:
    """Only the nearest existing folder was checked (that it is a folder): a report
    file under /proc (where not even root makes a file) ran every trial, stored them,
    and failed at the end with "No such file or directory: '/proc/nope'", naming no
    report file. It is refused first, naming the file; the probe leaves nothing."""
    store = tmp_path / "store.db"
    if kind == "rescore":
        await runner(store).run("a")
    before = _names(tmp_path)
    target = Path("/proc/nope/r.json")
    with pytest.raises(corral.ConfigError, match="report file '/proc/nope/r.json' cannot be"):
        if kind == "run":
            await runner(store).run("b", report_file=target)
        else:
            await runner(store).rescore("a", report_file=str(target))
    assert _names(tmp_path) == before
    await runner(store).run("c", report_file=tmp_path / "new" / "r.json")
    assert _names(tmp_path / "new") == ["r.json"]  # no probe left


@pytest.mark.anyio
@pytest.mark.parametrize("blocker", ["reports", "reports/b.json/x"])
async def test_a_default_report_file_that_cannot_be_written_is_refused_first(
    tmp_path: Path, blocker: str
) -> None:
    """The report beside the store (reports/ID.json) was never checked: a file named
    ``reports`` there (or a folder where the report goes) failed the run at its end."""
    (tmp_path / blocker).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / blocker).write_text("")
    store = tmp_path / "store.db"
    expected = str(tmp_path / "reports" / "b.json")
    with pytest.raises(corral.ConfigError, match=f"report file '{expected}'"):
        await runner(store).run("b")
    assert not store.exists()


@pytest.mark.anyio
async def test_a_report_file_that_fails_at_the_end_names_it_and_the_way_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails at the end (a full disk) said only the system's words and a
    path; it names the report file, says the results are stored, and how to write it."""

    def full(path: Path, *args: Any) -> None:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr("corral._runner.write_report", full)
    store, target = tmp_path / "store.db", tmp_path / "r.json"
    with pytest.raises(corral.CorralError) as caught:
        await runner(store).run("b", report_file=target)
    assert isinstance(caught.value, OSError)  # still what a caller catching OSError catches
    message = str(caught.value)
    assert f"report file {str(target)!r} could not be written" in message
    assert "No space left on device" in message
    assert f"corral report b --store {store} -k 1 --output {target}" in message
    assert (await reported(open_store(store))).finished == 3  # the results are stored


@pytest.mark.anyio
@pytest.mark.parametrize("name", ["store.db", "store.db-wal", "bench.py"])
async def test_a_report_file_over_the_store_or_the_benchmark_file_is_refused(
    tmp_path: Path, name: str
) -> None:
    """Before, the report's JSON replaced the store (every benchmark in it) or the
    benchmark file the run was loaded from."""
    store, bench = tmp_path / "store.db", tmp_path / "bench.py"
    bench.write_text("# the benchmark\n")
    await runner(store).run("a")
    target = tmp_path / name
    refused = f"report_file {str(target)!r} is the"
    with pytest.raises(corral.ConfigError, match=refused):
        await runner(store).run("b", report_file=target, source=bench)
    if name != "bench.py":  # a rescore reads no benchmark file
        with pytest.raises(corral.ConfigError, match=refused):
            await runner(store).rescore("a", report_file=target)
    assert bench.read_text() == "# the benchmark\n"
    opened = open_store(store)
    async with opened.opened():
        assert await opened.benchmark_config("a") is not None
        assert await opened.benchmark_config("b") is None


@pytest.mark.anyio
async def test_a_report_file_hard_linked_to_the_store_or_the_benchmark_file_is_refused(
    tmp_path: Path,
) -> None:
    """Another name of the same file (a hard link) was written over all the same."""
    store, bench = tmp_path / "store.db", tmp_path / "bench.py"
    bench.write_text("# the benchmark\n")
    await runner(store).run("a")
    for original, link in ((store, tmp_path / "store.json"), (bench, tmp_path / "bench.json")):
        os.link(original, link)
        with pytest.raises(corral.ConfigError, match=f"report_file {str(link)!r} is the"):
            await runner(store).run("b", report_file=link, source=bench)
    assert bench.read_text() == "# the benchmark\n"


@pytest.mark.anyio
async def test_a_postgresql_store_made_before_run_records_gains_them(pg_dsn: str) -> None:
    await runner(open_store(pg_dsn)).run("b", trials_per_task=2)
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP TABLE corral.runs")  # as Corral bee6a90 left it
    old = open_store(pg_dsn, read_only=True)
    async with old.opened():
        assert await old.runs("b") == []  # read as before, changing nothing
    # A writer that may not create a store (corral rescore) adds the table.
    await runner(open_store(pg_dsn, create=False)).rescore("b", task_ids=["other"])
    async with old.opened():
        assert [r.kind for r in await old.runs("b")] == ["rescore"]


@pytest.mark.anyio
async def test_report_seconds_is_what_building_the_report_took(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``timings["report_seconds"]`` was taken as the report's arguments were made, before
    it was built: some microseconds, whatever the report took."""
    clock = {"late": 0.0}
    real_time = corral._runner.time.time
    built = corral._runner.stored_report

    async def slow_report(*args: Any, **kwargs: Any) -> BenchmarkReport:
        report = await built(*args, **kwargs)
        clock["late"] = 5.0  # the report took five seconds
        return report

    monkeypatch.setattr("corral._runner.stored_report", slow_report)
    monkeypatch.setattr("corral._runner.time.time", lambda: real_time() + clock["late"])
    report = await runner(tmp_path / "store.db").run("b")
    assert 5.0 <= report.timings["report_seconds"] < 6.0
    again = await reported(open_store(tmp_path / "store.db"))
    assert again.timings["report_seconds"] == report.timings["report_seconds"]
