"""Errors in the report: trial errors and evaluation failures counted apart, grouped by
message; an incomplete report says so; a run and ``corral report`` give the same figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from corral import (
    AgentSession,
    BenchmarkTaskMetadata,
    Commit,
    CorralRunner,
    Evaluation,
    Final,
    TrialRecord,
    TrialStatus,
)
from corral.cli import main
from corral.cli._inspect import rebuild_report
from corral.report import ErrorGroup, build_report
from corral.store import SQLiteStore, TrialKey

from ..support.scripted import scripted_runner


def failed(task_id: str, trial: int, error: str) -> TrialRecord:
    return TrialRecord(task_id, trial, TrialStatus.ERROR, error=error)


def unscored(task_id: str, trial: int, error: str) -> TrialRecord:
    return TrialRecord(
        task_id,
        trial,
        TrialStatus.COMPLETED,
        output=1,
        error=f"evaluation failed: {error}",
        evaluation_error=error,
    )


def test_errors_and_evaluation_failures_are_grouped_apart_with_examples() -> None:
    records = {
        ("a", 0): failed("a", 0, "KeyError: 'row 17'"),
        ("a", 1): failed("a", 1, "KeyError: 'row 18'"),  # same message but for the number
        ("a", 2): failed("a", 2, "TypeError: bad"),
        ("b", 0): failed("b", 0, "KeyError: 'row 1'"),
        ("b", 1): failed("b", 1, "KeyError: 'row 2'"),
        ("b", 2): unscored("b", 2, "ValueError: grader down"),
        ("c", 0): unscored("c", 0, "ValueError: grader down"),
        ("c", 1): TrialRecord("c", 1, TrialStatus.UNREACHABLE, error="parent 'p' ended error"),
        ("c", 2): TrialRecord("c", 2, TrialStatus.COMPLETED, evaluation=Evaluation(1.0, True)),
    }
    config = {"trials_per_task": 3, "tasks": {t: {} for t in "abc"}}
    report = build_report("b", config, records=records, k_values=(1,))
    assert report.errors == (
        ErrorGroup("KeyError: 'row 17'", 4, ("a#0", "a#1", "b#0"), variants=4),
        ErrorGroup("TypeError: bad", 1, ("a#2",)),
    )
    assert report.evaluation_errors == (ErrorGroup("ValueError: grader down", 2, ("b#2", "c#0")),)
    data = report.to_dict()
    assert data["errors"][0] == {
        "message": "KeyError: 'row 17'",
        "count": 4,
        "examples": ["a#0", "a#1", "b#0"],
        "variants": 4,
    }
    assert data["evaluation_errors"][0]["count"] == 2
    assert json.loads(json.dumps(data)) == data


def test_numbers_and_ids_group_but_words_do_not() -> None:
    messages = [
        "TimeoutError: request 0x7f3a9c after 5.25 s",
        "TimeoutError: request 0x1b2c3d after 12 s",
        "TimeoutError: request 9b2f1c4e-1111-2222-3333-444455556666 after 1 s",
        "TimeoutError: response 12 after 1 s",
        "ValueError: request 1 after 1 s",
    ]
    records = {("t", i): failed("t", i, m) for i, m in enumerate(messages)}
    report = build_report(
        "b", {"trials_per_task": 5, "tasks": {"t": {}}}, records=records, k_values=(1,)
    )
    assert [(g.message, g.count) for g in report.errors] == [
        (messages[0], 3),
        (messages[3], 1),
        (messages[4], 1),
    ]


def test_a_report_knows_whether_every_trial_finished() -> None:
    config = {"trials_per_task": 2, "tasks": {"a": {}, "b": {}}}
    done = TrialRecord("a", 0, TrialStatus.COMPLETED, evaluation=Evaluation(1.0, True))
    partial = build_report("b", config, records={("a", 0): done}, k_values=(1,))
    assert (partial.finished, partial.total, partial.complete) == (1, 4, False)
    data = partial.to_dict(tasks=False)
    assert (data["finished"], data["total"], data["complete"]) == (1, 4, False)
    records = {
        (t, r): TrialRecord(t, r, TrialStatus.ERROR, error="E: x") for t in "ab" for r in (0, 1)
    }
    full = build_report("b", config, records=records, k_values=(1,))
    assert (full.finished, full.total, full.complete) == (4, 4, True)


# --- end to end: a run, an interrupted run, and `corral report` --------------------------


def decide(s: AgentSession) -> Final:
    if s.task_id == "broken" and s.trial % 2 == 0:
        raise RuntimeError(f"tool {s.trial} exploded")
    return Final(s.trial)


def evaluate(r: TrialRecord) -> Evaluation:
    if r.task_id == "graded" and r.trial == 1:
        raise ZeroDivisionError("division by zero")
    return Evaluation(1.0, r.trial != 2)


TASKS = {
    "ok": BenchmarkTaskMetadata("a", "e"),
    "broken": BenchmarkTaskMetadata("a", "e"),
    "graded": BenchmarkTaskMetadata("a", "e"),
}


def make_runner(store: Path) -> CorralRunner:
    return scripted_runner(TASKS, decide, evaluate, store)


class StopAfter:
    """Cancels ``scope`` once ``n`` evaluation commits are durable: an interrupted run."""

    def __init__(self, scope: anyio.CancelScope, n: int) -> None:
        self.scope, self.n = scope, n

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        if commit.kind == "evaluation":
            self.n -= 1
            if self.n == 0:
                self.scope.cancel()


async def interrupted_run(store: Path, evaluations: int) -> None:
    with anyio.CancelScope() as scope:
        await make_runner(store).run(
            "b", trials_per_task=4, max_parallel=1, observers=[StopAfter(scope, evaluations)]
        )
    assert scope.cancel_called


async def rebuilt(store: Path, ks: tuple[int, ...] = ()) -> Any:
    opened = SQLiteStore(store)
    async with opened.opened():
        return await rebuild_report(opened, "b", ks)


@pytest.mark.anyio
async def test_a_run_and_the_rebuilt_report_name_the_same_errors(tmp_path: Path) -> None:
    report = await make_runner(tmp_path / "s.db").run("b", trials_per_task=4, k_values=(1,))
    assert report.errors == (
        ErrorGroup("RuntimeError: tool 0 exploded", 2, ("broken#0", "broken#2"), variants=2),
    )
    assert report.evaluation_errors == (
        ErrorGroup("ZeroDivisionError: division by zero", 1, ("graded#1",)),
    )
    again = await rebuilt(tmp_path / "s.db", (1,))
    assert again.errors == report.errors
    assert again.evaluation_errors == report.evaluation_errors


@pytest.mark.anyio
async def test_wall_time_and_resumed_agree_between_a_run_and_the_rebuilt_report(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.db"
    await interrupted_run(store, 5)
    partial = await rebuilt(store)
    assert not partial.complete and 5 <= partial.finished < 12 and partial.total == 12
    report = await make_runner(store).run("b", trials_per_task=4, k_values=(1, 2, 4))
    assert report.complete and report.resumed == partial.finished
    again = await rebuilt(store)
    for name in ("started_at", "finished_at", "wall_seconds", "resumed", "finished", "total"):
        assert getattr(again, name) == getattr(report, name), name
    # The wall time is the span of the recorded work: the first commit of a finished
    # trial to the last terminal or evaluation commit, over every run of this id.
    firsts = [t.started_at for task in report.tasks.values() for t in task.trials]
    lasts = [t.finished_at for task in report.tasks.values() for t in task.trials]
    assert report.started_at == min(firsts) and report.finished_at == max(lasts)


@pytest.mark.anyio
async def test_a_trial_awaiting_its_evaluation_is_not_finished(tmp_path: Path) -> None:
    """As a resume sees it: the evaluation still runs, so the report leaves it out."""
    store = tmp_path / "s.db"
    opened = SQLiteStore(store)
    config = {"trials_per_task": 1, "tasks": {"t": {"environment_id": "e"}}}
    async with opened.opened():
        await opened.register_benchmark("b", config)
        terminal = {"status": "completed", "output": 1, "attempts": 1, "state": None}
        await opened.append(TrialKey("b", "t", 0), [Commit(0, "terminal", terminal, 1.0)])
        report = await rebuild_report(opened, "b")
    assert (report.finished, report.total, report.counts["unfinished"]) == (0, 1, 1)
    assert report.tasks["t"].trials == []


def _cli(*args: Any) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.anyio
async def test_report_after_an_interrupted_run_says_it_is_incomplete(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    await interrupted_run(store, 3)
    finished = (await rebuilt(store)).finished
    assert 3 <= finished < 12
    out = await anyio.to_thread.run_sync(_cli, "report", "b", "--store", store)
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert f"incomplete: {finished} of 12 trials finished" in text
    assert "--benchmark-id 'b'" in text  # how to resume
    data = json.loads(
        (await anyio.to_thread.run_sync(_cli, "report", "b", "--store", store, "--json")).output
    )
    assert (data["complete"], data["finished"], data["total"]) == (False, finished, 12)


@pytest.mark.anyio
async def test_the_summary_table_names_errors_apart_from_failed_evaluations(
    tmp_path: Path,
) -> None:
    store = tmp_path / "s.db"
    await make_runner(store).run("b", trials_per_task=4)
    out = await anyio.to_thread.run_sync(_cli, "report", "b", "--store", store)
    text = " ".join(out.output.split())
    assert "trial errors: 2" in text and "evaluation failures: 1" in text
    assert "RuntimeError: tool 0 exploded" in text and "broken#0, broken#2" in text
    assert "ZeroDivisionError: division by zero" in text and "graded#1" in text
    assert "a trial's history and traceback: corral show b broken 0" in text
    assert "incomplete" not in text
