"""Commits no trial waits for (terminals, evaluations) reach observers only once durable.

Observers look in the SQLite file itself, through a connection of their own, for
every commit they hear of; the returned report, and a run resumed after a
cancellation, are checked against the file's rows.
"""

from __future__ import annotations

import json
import sqlite3
from collections import Counter, defaultdict
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from bench.durable_bench import comparable

import corral
from corral import (
    Action,
    AgentSession,
    BenchmarkTaskMetadata,
    Commit,
    CorralRunner,
    Final,
    MemoryStore,
    RetryPolicy,
    ToolEffect,
    TrialKey,
)
from corral.testing import FakeEnvironment, ScriptedAgent, wait_all_tasks_blocked

pytestmark = pytest.mark.anyio

TASKS, TRIALS = 5, 3
KINDS = ["setup", "action", "tool_effect", "terminal", "evaluation"]  # in seq order
RUN: dict[str, Any] = {"trials_per_task": TRIALS, "k_values": (1, 2), "max_parallel": 4}
RUN["max_parallel_per_task"] = 2


def decide(session: AgentSession) -> Action | Final:
    """One tool step, then the state as the output."""
    if session.iteration == 0:
        return Action("add", {"n": session.inputs["base"] + session.trial})
    return Final(session.state)


def add(action: Action, session: AgentSession) -> ToolEffect:
    total = session.state + action.arguments["n"]
    return ToolEffect(observation=total, state=total)


def runner(store: corral.CommitStore) -> corral.CorralRunner:
    tasks = {
        f"t{i}": corral.BenchmarkTaskMetadata("a", "e", inputs={"base": i}) for i in range(TASKS)
    }
    environment = FakeEnvironment(
        state=0, effect=add, evaluate=lambda t: corral.Evaluation(t.output, t.output % 3 != 0)
    )
    agents = {"a": ScriptedAgent(decide)}
    return corral.CorralRunner(tasks, agents, {"e": environment}, store=store, max_retries=0)


def rows(path: Path) -> dict[tuple[str, int, int], tuple[str, Any]]:
    """Every commit in the file: (task_id, trial, seq) -> (kind, payload)."""
    with closing(sqlite3.connect(path)) as conn:
        found = conn.execute("SELECT task_id, trial, seq, kind, payload FROM commits").fetchall()
    return {(t, r, s): (kind, json.loads(p)) for t, r, s, kind, p in found}


class Probe:
    """An observer that looks for each commit's row in the file the moment it hears of it.

    Misses are collected, not raised (an observer that raises is dropped). With
    ``scope``, it cancels the run once it has heard of ``after`` terminal commits.
    """

    def __init__(self, path: Path, scope: anyio.CancelScope | None = None, after: int = 0):
        self.path, self.scope, self.after = path, scope, after
        self.conn: sqlite3.Connection | None = None
        self.heard: list[tuple[TrialKey, int, str]] = []
        self.absent: list[tuple[TrialKey, int, str]] = []

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        if self.conn is None:
            self.conn = sqlite3.connect(self.path, isolation_level=None)
        sql = "SELECT kind FROM commits WHERE benchmark_id=? AND task_id=? AND trial=? AND seq=?"
        found = self.conn.execute(sql, (*key, commit.seq)).fetchone()
        self.heard.append((key, commit.seq, commit.kind))
        if found != (commit.kind,):
            self.absent.append(self.heard[-1])
        terminals = sum(kind == "terminal" for _, _, kind in self.heard)
        if self.scope is not None and commit.kind == "terminal" and terminals == self.after:
            self.scope.cancel()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


class Recording(corral.SQLiteStore):
    """A SQLiteStore that remembers every commit handed to it: (task_id, trial, seq)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.handed: set[tuple[str, int, int]] = set()

    def enqueue(self, key: TrialKey, commits: Sequence[Commit]) -> Any:
        slot = super().enqueue(key, commits)
        self.handed.update((key.task_id, key.trial, c.seq) for c in commits)
        return slot


async def probed_run(store: corral.SQLiteStore, probe: Probe) -> corral.BenchmarkReport:
    """Run the benchmark into ``store`` with ``probe`` observing; close its connection after."""
    with closing(probe):
        return await runner(store).run("b", **RUN, observers=[probe])


async def test_every_commit_is_in_the_file_when_observers_hear_of_it(tmp_path: Path) -> None:
    """Of every kind, each commit heard of once, all of the file's rows heard of."""
    probe = Probe(tmp_path / "s.db")
    await probed_run(corral.SQLiteStore(tmp_path / "s.db"), probe)
    assert probe.absent == []
    heard = [(key.task_id, key.trial, seq) for key, seq, _ in probe.heard]
    assert len(heard) == len(set(heard)) == TASKS * TRIALS * len(KINDS)
    assert set(heard) == set(rows(tmp_path / "s.db"))
    assert Counter(kind for _, _, kind in probe.heard) == {k: TASKS * TRIALS for k in KINDS}


async def test_observers_hear_each_trials_commits_in_seq_order(tmp_path: Path) -> None:
    """Per trial: setup, action, tool_effect, terminal, evaluation, as seqs 0 to 4."""
    probe = Probe(tmp_path / "s.db")
    await probed_run(corral.SQLiteStore(tmp_path / "s.db"), probe)
    by_trial: dict[TrialKey, list[tuple[int, str]]] = defaultdict(list)
    for key, seq, kind in probe.heard:
        by_trial[key].append((seq, kind))
    assert len(by_trial) == TASKS * TRIALS
    assert all(heard == list(enumerate(KINDS)) for heard in by_trial.values()), by_trial


async def test_the_returned_report_is_what_the_file_holds(tmp_path: Path) -> None:
    """When run() returns, every terminal and evaluation is in the file, as reported."""
    report = await probed_run(corral.SQLiteStore(tmp_path / "s.db"), Probe(tmp_path / "s.db"))
    found = rows(tmp_path / "s.db")
    in_file = {key[:2]: [] for key in found}
    for (task_id, trial, _), row in sorted(found.items()):
        in_file[task_id, trial].append(row)
    reported = {(tid, t.trial): t for tid, task in report.tasks.items() for t in task.trials}
    assert reported.keys() == in_file.keys() and len(reported) == TASKS * TRIALS
    for key, t in reported.items():
        assert [kind for kind, _ in in_file[key]] == KINDS and t.commits == len(KINDS)
        terminal, evaluation = in_file[key][3][1], in_file[key][4][1]
        assert (terminal["status"], terminal["output"]) == (str(t.status), t.output)
        assert t.evaluation is not None
        assert (evaluation["score"], evaluation["passed"]) == (t.evaluation.score, t.passed)


@pytest.mark.parametrize("after", [1, 4, 9])
async def test_a_cancelled_run_keeps_what_it_handed_over_and_resumes(
    tmp_path: Path, after: int
) -> None:
    """Cancelled once ``after`` terminals are heard of: every append handed to the store
    is in a sound file, and a resumed run reports what an uninterrupted one does."""
    path, store = tmp_path / "s.db", Recording(tmp_path / "s.db")
    with anyio.CancelScope() as scope:
        probe = Probe(path, scope, after)
        await probed_run(store, probe)
    assert scope.cancelled_caught and probe.absent == []
    found = rows(path)
    assert store.handed - set(found) == set()  # opened() writes them, even when cancelled
    assert sum(kind == "terminal" for kind, _ in found.values()) >= after
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        spans = conn.execute(
            "SELECT MIN(seq), MAX(seq), COUNT(*) FROM commits GROUP BY task_id, trial"
        ).fetchall()
    assert all(low == 0 and count == high + 1 for low, high, count in spans), spans
    reference = await runner(corral.MemoryStore()).run("b", **RUN)
    resumed = await runner(corral.SQLiteStore(path)).run("b", **RUN)
    assert comparable(resumed) == comparable(reference)


async def test_an_append_handed_over_just_before_a_cancel_is_written(tmp_path: Path) -> None:
    """The append wakes the flush loop and the run is cancelled before the loop runs.

    Fails today: the loop takes the batch, then `anyio.to_thread.run_sync` raises
    Cancelled at its first checkpoint, `_write_next` fails the whole batch with it
    and drops it from ``_inflight``, so `opened()` finds nothing left to write.
    """
    store = corral.SQLiteStore(tmp_path / "s.db")
    with anyio.CancelScope() as scope:
        async with store.opened():
            await wait_all_tasks_blocked()  # the flush loop waits for work
            store.enqueue(TrialKey("b", "t0", 0), [Commit(0, "setup", {"state": 0}, 0.0)])
            scope.cancel()
            await anyio.sleep_forever()
    assert set(rows(tmp_path / "s.db")) == {("t0", 0, 0)}


class _Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[TrialKey, int, str]] = []

    def on_commit(self, key: TrialKey, commit: corral.Commit) -> None:
        self.seen.append((key, commit.seq, commit.kind))


@pytest.mark.anyio
async def test_observers_see_every_durable_commit_of_a_retried_trial() -> None:
    def decide(session: corral.AgentSession) -> Final:
        if session.attempt == 0:
            raise RuntimeError("flaky model")
        return Final(1)

    recorder = _Recorder()
    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=MemoryStore(),
        retry_policy=RetryPolicy(max_retries=1, backoff_base=0),
        observers=[recorder],
    )
    await runner.run("b")
    history = await runner.store.history(TrialKey("b", "t", 0))
    assert [(c.seq, c.kind) for c in history] == [(0, "setup"), (1, "terminal"), (2, "evaluation")]
    assert sorted((seq, kind) for _, seq, kind in recorder.seen) == [
        (c.seq, c.kind) for c in history
    ]


async def test_an_observer_that_fails_at_the_start_is_dropped() -> None:
    """An observer that raises is logged and dropped (README): one whose
    ``on_run_start`` raised (an exporter that could not open its file) still heard of
    every commit, each on state it never set up, while the run went on."""

    class FailsAtStart(_Recorder):
        def on_run_start(self, info: corral.RunInfo) -> None:
            raise OSError("cannot open the export file")

    failing, recorder = FailsAtStart(), _Recorder()
    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(lambda session: Final(1))},
        {"e": FakeEnvironment()},
        store=MemoryStore(),
    )
    report = await runner.run("b", observers=[failing, recorder])
    assert report.counts["completed"] == 1
    assert [kind for _, _, kind in recorder.seen] == ["setup", "terminal", "evaluation"]
    assert failing.seen == []
