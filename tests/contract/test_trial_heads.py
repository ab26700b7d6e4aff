"""The trial heads a store keeps equal the one fold of every commit, after any mix of
runs, reruns, --retry-errors, rescores and copies; a report built from them equals
one rebuilt from every commit, figure for figure and record for record."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import corral
from corral import (
    Action,
    BenchmarkTaskMetadata,
    CommitStore,
    CorralRunner,
    Evaluation,
    Final,
    RetryPolicy,
    TrialRecord,
)
from corral.cli import main
from corral.history import StoredConfig
from corral.report import build_report
from corral.report._build import records_from
from corral.report._calls import calls_by_model
from corral.report._passk import default_ks
from corral.report._stored import stored_report
from corral.store import copy_benchmarks, open_store
from corral.store._heads import head_of, heads_of
from corral.testing import FakeEnvironment, ScriptedAgent

from ..support import pg
from .test_store import listed, overview_config

pg_dsn = pg.pg_dsn

TASKS = {
    "t0": BenchmarkTaskMetadata("a", "e", max_iterations=2),
    "t1": BenchmarkTaskMetadata("a", "e", max_iterations=2),
    "t2": BenchmarkTaskMetadata("a", "e", max_iterations=2, dependencies=("t0",)),
}
TRIALS = 2
OUTCOMES = ("pass", "fail", "error", "loop", "score_error")


class World:
    """What each attempt of each trial does: drawn by hypothesis, one per attempt."""

    def __init__(self, plan: list[str], costs: list[float]) -> None:
        self.plan = plan
        self.costs = costs
        self.attempts: dict[tuple[str, int], int] = {}
        self.scoring = 0  # bumped by a rescore: the scores change

    def outcome(self, task: str, trial: int) -> str:
        n = self.attempts.get((task, trial), 0)
        index = (sorted(TASKS).index(task) * TRIALS + trial) * 3 + n
        return self.plan[index % len(self.plan)]

    def decide(self, s: corral.AgentSession) -> Any:
        key = (s.task_id, s.trial)
        outcome = self.outcome(*key)
        cost = self.costs[(len(self.attempts) + s.trial) % len(self.costs)]
        s.record_usage(input_tokens=3, output_tokens=1, cost=cost)
        # Model calls, counted on the terminal: a report sums them per model.
        s.record_model_call(
            [{"role": "user", "content": "go"}],
            model=f"m{s.trial}",
            latency=cost + 0.1,
            text=None if outcome == "error" else "ok",
            error="refused" if outcome == "error" else None,
        )
        if outcome == "loop":
            return Action("noop")
        self.attempts[key] = self.attempts.get(key, 0) + 1
        if outcome == "error":
            raise RuntimeError(f"boom {s.task_id} #{s.trial}")
        return Final(outcome)

    def evaluate(self, r: TrialRecord) -> Evaluation:
        if r.output == "score_error" and self.scoring % 2 == 0:
            raise ValueError(f"scorer broke on {r.task_id}")
        passed = r.output == "pass" or (self.scoring % 2 == 1 and r.trial == 0)
        scores = {"accuracy": 0.1 * (r.trial + 1) + 0.1 * self.scoring}
        if r.task_id != "t1":  # an abstaining scorer leaves a name out
            scores["f1"] = 0.3
        # Scoring spends too (a graded-by-model scorer): counted once, with the trial.
        usage = corral.Usage(7, 2, 0.05 * (self.scoring + 1))
        return Evaluation(float(passed), passed, scores=scores, usage=usage)


def runner(world: World, store: CommitStore) -> CorralRunner:
    return CorralRunner(
        TASKS,
        {"a": ScriptedAgent(world.decide)},
        {"e": FakeEnvironment(evaluate=world.evaluate)},
        store=store,
        retry_policy=RetryPolicy(max_retries=0),
    )


async def check_same(store: CommitStore, benchmark_id: str = "b") -> None:
    """Heads equal the fold of every commit; so do the reports built from each."""
    async with store.opened():
        config = await store.benchmark_config(benchmark_id)
        assert config is not None
        summaries = await store.summaries(benchmark_id)
        kept = [h async for chunk in heads_of(store, benchmark_id) for h in chunk]
        # A trial a killed rerun reopened counts its earlier attempt until the new one ends.
        folded = [head_of(s) for s in summaries if s.counted().terminal is not None]
        assert [h for h in kept if h.done] == [h for h in folded if h.done]
        # Every head kept is the fold's, next commit and all (what `heads_written` sums:
        # a rescore of a killed rerun's standing attempt moves it on).
        every = {(s.task_id, s.trial): head_of(s) for s in summaries}
        assert kept == [every[h.task_id, h.trial] for h in kept]
        n = StoredConfig.decode(config).trials_per_task
        ks = default_ks(n)
        from_heads = await stored_report(store, benchmark_id, config, k_values=ks)
        from_commits = build_report(
            benchmark_id, config, records=records_from(summaries), k_values=ks
        )
        finished = await store.finished_trials(benchmark_id, n)  # type: ignore[attr-defined]
        assert finished == from_commits.finished
    # The records are read after the store closed, from a reader of its own.
    assert from_heads.to_dict() == from_commits.to_dict()
    assert list(from_heads.records()) == list(from_commits.records())
    assert from_heads.retries == from_commits.retries
    assert from_heads.model_calls == from_commits.model_calls
    assert from_heads.model_calls == calls_by_model(from_commits.records())
    if benchmark_id == "b":  # the random runs' (World.decide), which made some
        assert from_commits.model_calls or not from_commits.finished


STEPS = st.lists(
    st.sampled_from(["run", "retry_errors", "rerun_all", "rescore", "subset", "killed"]),
    min_size=1,
    max_size=5,
)
PLANS = st.lists(st.sampled_from(OUTCOMES), min_size=1, max_size=18)
COSTS = st.lists(st.sampled_from([0.1, 0.2, 0.3, 1e-9, 0.0]), min_size=1, max_size=4)


async def play(world: World, store: CommitStore, steps: list[str]) -> None:
    for step in ["run", *steps]:
        r = runner(world, store)
        if step == "run":
            await r.run("b", trials_per_task=TRIALS)
        elif step == "retry_errors":
            await r.run("b", trials_per_task=TRIALS, rerun=("error", "timeout"))
        elif step == "rerun_all":
            await r.run("b", trials_per_task=TRIALS, rerun=("error", "max_iterations"))
        elif step == "subset":
            await r.run("b", trials_per_task=TRIALS, task_ids=["t1"])
        elif step == "killed":
            await killed_rerun(store)
        else:
            try:
                world.scoring += 1
                await r.rescore("b")
            except corral.ConfigError:  # nothing run yet: nothing to rescore
                pass


async def killed_rerun(store: CommitStore) -> None:
    """What a rerun killed after reopening a finished trial leaves: its reopen commit
    (and a first step, paid for, appended after it as a runtime does), no terminal yet."""
    key = corral.TrialKey("b", "t1", 1)
    async with store.opened():
        history = await store.history(key)
        if not any(c.kind == "terminal" for c in history):
            return
        head = history[-1].seq + 1
        reopen = {"reason": "rerun", "previous_status": "completed"}
        step = {"action": {"tool": "noop", "arguments": {}}}
        await store.append(key, [corral.Commit(head, "reopen", reopen, 2.0)])
        paid = corral.Usage(5, 1, 0.7)
        await store.append(key, [corral.Commit(head + 1, "action", step, 2.5, paid)])


@pytest.fixture
def scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp())
    yield path
    shutil.rmtree(path, ignore_errors=True)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS, plan=PLANS, costs=COSTS)
# A rescore mid-rerun (of the attempt a killed rerun left counted), twice, then resumed.
@example(steps=["killed", "rescore", "killed", "rescore", "run"], plan=["fail"], costs=[0.1])
@pytest.mark.slow  # a property test of many examples (the full suite runs it)
def test_sqlite_heads_equal_the_fold_after_runs_rescores_and_copies(
    scratch: Path, steps: list[str], plan: list[str], costs: list[float]
) -> None:
    folder = Path(tempfile.mkdtemp(dir=scratch))
    world = World(plan, costs)
    store = open_store(folder / "store.db")
    anyio.run(play, world, store, steps)
    anyio.run(check_same, store)
    copy = open_store(folder / "copy.db")
    memory = corral.MemoryStore()
    anyio.run(copy_benchmarks, store, copy)
    anyio.run(copy_benchmarks, store, memory)
    anyio.run(check_same, copy)
    anyio.run(check_same, memory)
    # And after more work on the copy (a resume of the copied benchmark).
    anyio.run(play, world, copy, ["retry_errors", "rescore"])
    anyio.run(check_same, copy)


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS, plan=PLANS, costs=COSTS)
@pytest.mark.slow  # a property test of many examples (the full suite runs it)
def test_postgres_heads_equal_the_fold_after_runs_rescores_and_copies(
    pg_dsn: str, scratch: Path, steps: list[str], plan: list[str], costs: list[float]
) -> None:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as conn:  # each example from empty
        conn.execute("DROP SCHEMA IF EXISTS corral CASCADE")
    world = World(plan, costs)
    store = open_store(pg_dsn)
    anyio.run(play, world, store, steps)
    anyio.run(check_same, store)
    copy = open_store(Path(tempfile.mkdtemp(dir=scratch)) / "copy.db")
    anyio.run(copy_benchmarks, store, copy)
    anyio.run(check_same, copy)


V2_STORE = Path(__file__).parents[1] / "data" / "v2_store"
V1_STORE = Path(__file__).parents[1] / "data" / "v1_store"


def test_an_older_store_gets_its_heads_once_and_reports_what_it_did(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from tests.data.v2_store.make_v2_store import COMMANDS

    copy = tmp_path / "v2"
    shutil.copytree(V2_STORE, copy, ignore=shutil.ignore_patterns("expected", "*.py"))
    monkeypatch.chdir(copy)
    monkeypatch.setenv("CORRAL_STORE", "store.db")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")

    async def first_open() -> None:
        async with open_store(copy / "store.db").opened():
            pass

    anyio.run(first_open)
    said = capfd.readouterr().err
    assert "building trial summaries" in said and "trials summarised in" in said
    anyio.run(first_open)  # once only
    assert "building" not in capfd.readouterr().err
    for name in sorted(COMMANDS):  # read from the heads now, as they were printed
        result = CliRunner().invoke(main, list(COMMANDS[name]), catch_exceptions=False)
        expected = (V2_STORE / "expected" / f"{name}.txt").read_text()
        assert f"exit {result.exit_code}\n{result.stdout}" == expected, name
    for benchmark_id in ("api", "demo", "cut"):
        anyio.run(check_same, open_store(copy / "store.db"), benchmark_id)


def test_an_older_store_opened_read_only_reports_from_its_commits(tmp_path: Path) -> None:
    copy = tmp_path / "store.db"
    shutil.copy(V1_STORE / "store.db", copy)
    before = copy.read_bytes()
    store = open_store(copy, read_only=True)

    async def benchmarks() -> list[str]:
        async with store.opened():
            return [b.benchmark_id for b in await store.benchmarks()]

    for benchmark_id in anyio.run(benchmarks):
        anyio.run(check_same, store, benchmark_id)
    assert copy.read_bytes() == before  # nothing written


def test_model_calls_and_the_summary_are_counted_from_the_heads_without_records(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from corral.cli._tables import report_summary
    from corral.report import compare
    from corral.report._lazy import StoreRecords
    from corral.report._tasks import TaskColumns

    store = open_store(tmp_path / "store.db")
    world = World(["pass"], [0.25])
    anyio.run(play, world, store, ["rescore"])

    def refused(self: Any, task_id: str) -> list[TrialRecord]:
        raise AssertionError(f"read the records of {task_id}")

    async def report() -> Any:
        async with store.opened():
            config = await store.benchmark_config("b")
            assert config is not None
            return await stored_report(store, "b", config, k_values=(1, 2))

    from_heads = anyio.run(report)
    monkeypatch.setattr(StoreRecords, "task_records", refused)
    counted = from_heads.model_calls
    assert [(m, c.calls, round(c.latency, 9)) for m, c in counted.items()] == [
        ("m0", 3, 1.05),  # three tasks' trial 0, each 0.35 s
        ("m1", 3, 1.05),
    ]
    assert report_summary(from_heads, None).row_count > 0  # its model-call lines too
    # Nor is a task's report made for the headline, its intervals or a comparison.
    monkeypatch.setattr(TaskColumns, "_make", refused)
    assert (from_heads.finished, from_heads.scores.pass_at_k[1].value) == (6, 1.0)
    assert from_heads.named_scores["accuracy"].tasks == 3
    assert compare(from_heads, from_heads).tied == ("t0", "t1", "t2")


def test_postgres_heads_stay_exact_when_two_writers_share_a_trial(pg_dsn: str) -> None:
    """Each writer folds what it writes; a trial another writer appended to in between
    is refolded from the store, never made from a fold that missed commits."""
    key = corral.TrialKey("b", "t0", 0)
    done = {"status": "error", "error": "boom"}

    async def go() -> None:
        one, two = open_store(pg_dsn), open_store(pg_dsn)
        async with one.opened(), two.opened():
            await one.append(key, [corral.Commit(0, "setup", {}, 1.0)])
            await two.append(key, [corral.Commit(1, "terminal", done, 2.0)])
            await one.append(key, [corral.Commit(2, "reopen", {"reason": "rerun"}, 3.0)])
            await two.append(key, [corral.Commit(3, "terminal", done | {"error": "again"}, 4.0)])
            for store in (one, two):
                kept = [h async for chunk in heads_of(store, "b") for h in chunk]
                folded = [head_of(s) for s in await store.summaries("b")]
                assert kept == folded
                assert (kept[0].status, kept[0].next_seq, kept[0].done) == ("error", 4, True)

    anyio.run(go)


def test_report_json_is_written_a_task_at_a_time_as_one_dump_would(tmp_path: Path) -> None:
    import io
    import json

    store = open_store(tmp_path / "store.db")
    anyio.run(play, World(["pass", "error", "score_error"], [0.5]), store, [])
    printed = CliRunner().invoke(
        main, ["report", "b", "--store", str(tmp_path / "store.db"), "--json"]
    )
    assert printed.exit_code == 0, printed.output

    async def report() -> Any:
        async with store.opened():
            config = await store.benchmark_config("b")
            assert config is not None
            return await stored_report(store, "b", config, k_values=(1, 2))

    printed_data = json.loads(printed.output)
    assert printed.output == json.dumps(printed_data, indent=2) + "\n"
    assert sorted(printed_data["tasks"]) == ["t0", "t1", "t2"]
    built = anyio.run(report)
    written = io.StringIO()
    built.write_json(written, indent=2)
    assert written.getvalue() == json.dumps(built.to_dict(), indent=2, default=str) + "\n"
    empty, none = io.StringIO(), dataclasses.replace(built, tasks={})
    none.write_json(empty, indent=2)
    assert empty.getvalue() == json.dumps(none.to_dict(), indent=2, default=str) + "\n"


@pytest.mark.parametrize("where", ["sqlite", "postgres"])
def test_a_configuration_read_in_small_pieces_lists_the_tasks_of_the_whole(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    import uuid

    from corral.store import postgres, sqlite
    from corral.store._heads import task_list_of_config

    # Pieces of 7 bytes: cut inside keys, numbers and multi-byte characters.
    monkeypatch.setattr(sqlite, "PIECE", 7)
    monkeypatch.setattr(postgres, "CONFIG_PIECE", 7)
    address = str(tmp_path / "s.db") if where == "sqlite" else request.getfixturevalue("pg_dsn")
    benchmark_id = f"pieces-{uuid.uuid4().hex}"
    config = {
        "trials_per_task": 12,
        "tasks": {
            f"tâche-{i}-日本": {
                "agent_id": "a",
                "environment_id": f"env-{i % 3}",
                "model": f"modèle-{i % 2}" if i % 4 else None,
                "max_iterations": 3,
                "dependencies": [],
                "inputs": {"x": i, "s": "é" * i},
            }
            for i in range(40)
        },
    }

    async def read() -> Any:
        store = open_store(address)
        async with store.opened():
            await store.register_benchmark(benchmark_id, config)
            return await store.task_list(benchmark_id), await store.task_list("no-such")  # type: ignore[attr-defined]

    found, missing = anyio.run(read)
    assert found == task_list_of_config(config) and found is not None
    assert len(found.tasks) == 40 and missing is None


def test_sqlite_list_reads_the_overview_kept_with_a_configuration_while_it_is_unchanged(
    tmp_path: Path,
) -> None:
    """As on PostgreSQL (`test_store_postgres`): ``corral list`` reads each benchmark's
    task count from the overview written with its configuration while the text is the
    one it was counted from; a store without them is read right, and gets them on its
    first writable open."""
    import json
    import sqlite3

    from corral._json import dumps
    from corral.history import ConfigStream

    path = tmp_path / "s.db"

    config = overview_config

    async def overview(read_only: bool = True) -> list[tuple[str, int, int]]:
        return await listed(corral.SQLiteStore(path, read_only=read_only))

    async def register() -> None:
        store = corral.SQLiteStore(path)
        async with store.opened():
            await store.register_benchmark("a", config(4), created_at=1.0)
            await store.register_benchmark("b", ConfigStream(2, lambda: iter([])), created_at=2.0)

    def kept() -> list[tuple[object, ...]]:
        with sqlite3.connect(path) as conn:
            rows = conn.execute(
                "SELECT key, value FROM meta WHERE key LIKE 'overview:%' ORDER BY key"
            ).fetchall()
        return [(key.removeprefix("overview:"), *json.loads(value)[1:]) for key, value in rows]

    anyio.run(register)
    assert kept() == [("a", 3, 4), ("b", 2, 0)]
    assert anyio.run(overview) == [("a", 4, 3), ("b", 0, 2)]
    with sqlite3.connect(path) as conn:  # what is read is the kept figure, not the text
        (value,) = conn.execute("SELECT value FROM meta WHERE key = 'overview:b'").fetchone()
        digest = json.loads(value)[0]
        conn.execute("UPDATE meta SET value = ? WHERE key = 'overview:b'", (dumps([digest, 2, 9]),))
    assert anyio.run(overview) == [("a", 4, 3), ("b", 9, 2)]
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'overview:b'", (dumps([digest, 2, 0]),))
    with sqlite3.connect(path) as conn:  # changed by hand: the kept figures are not read
        conn.execute(
            "UPDATE benchmarks SET config = ? WHERE benchmark_id = 'a'", (dumps(config(6)),)
        )
    assert anyio.run(overview) == [("a", 6, 3), ("b", 0, 2)]
    with sqlite3.connect(path) as conn:  # as older code leaves it
        conn.execute("DELETE FROM meta WHERE key LIKE 'overview:%'")
    assert anyio.run(overview) == [("a", 6, 3), ("b", 0, 2)]
    assert anyio.run(overview, False) == [("a", 6, 3), ("b", 0, 2)]
    assert kept() == [("a", 3, 6), ("b", 2, 0)]


def test_the_writers_fold_gives_the_one_folds_head_and_a_gap_refolds() -> None:
    from corral.history import TrialFold
    from corral.store._heads import OpenFolds
    from corral.store._summary import summary_of

    key = corral.TrialKey("b", "t", 0)
    paid = corral.Usage(3, 4, 0.5)
    commits = [
        corral.Commit(0, "setup", {"state": 0}, 1.0, paid),
        corral.Commit(1, "terminal", {"status": "completed", "attempts": 1}, 2.0),
        corral.Commit(2, "reopen", {}, 3.0, paid),
        corral.Commit(3, "action", {"tool": "t"}, 4.0, paid),
        corral.Commit(4, "terminal", {"status": "completed", "worked": 0.5}, 5.0),
        corral.Commit(5, "evaluation", {"passed": True, "score": 1.0}, 6.0, paid),
    ]
    folds = OpenFolds()
    written = []
    for end in range(1, 7):
        known, head = folds.heads(key, commits[end - 1 : end])
        assert known
        if head is not None:
            written.append(end)
            assert head == head_of(summary_of("t", 0, TrialFold.of(commits[:end])))
    assert written == [3, 6]  # the reopen and the evaluation (a scored terminal waits)
    gap = OpenFolds()
    assert gap.heads(key, commits[:1]) == (True, None)
    assert gap.heads(key, [commits[1], commits[4]]) == (False, None)  # seqs 1, 4: refold


@pytest.mark.parametrize("missing", [(), ("status", "score", "error", "limit", "working_time")])
def test_sqlite_writes_a_heads_missing_values_as_null(missing: tuple[str, ...]) -> None:
    """The writer binds a missing value as NaN (`sqlite.NULL`, no adaptation of a None):
    the stored row is the one None gives, value and type."""
    import sqlite3

    from corral.store import sqlite as sqlite_store
    from corral.store._heads import HEAD_COLUMNS, TrialHead

    head = TrialHead(
        "t", 0, 5, True, "completed", True, 1.0, {"a": 0.5}, "e", "ev", 1, 5, 1.5, 2.5,
        corral.Usage(3, 4, 0.5), "tokens", 0.25, None,
    )._replace(**dict.fromkeys(missing))  # fmt: skip
    typed = ", ".join(f"{c}, typeof({c})" for c in HEAD_COLUMNS.split(", "))
    stored = []
    for null in (None, sqlite_store.NULL):
        conn = sqlite3.connect(":memory:")
        conn.executescript(sqlite_store._SCHEMA)
        conn.execute(sqlite_store._PUT_HEAD, ("b", *head.row(null)))
        stored.append(conn.execute(f"SELECT {typed} FROM trial_heads").fetchall())
    assert stored[0] == stored[1]
    assert stored[1][0].count("null") == len(missing) + 1  # model_calls, and each missing
