"""The report file takes the records the run kept as its trials finished
(`corral.report._spool.RecordSpool`) and is byte for byte the file the store's records
give: runs with every kind of ending, a rerun that reopens trials, a rescore."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from corral import (
    Action,
    AgentSession,
    BenchmarkTaskMetadata,
    CorralRunner,
    Evaluation,
    Final,
    TrialRecord,
)
from corral.report._files import report_path
from corral.report._lazy import StoreRecords

from ..support.scripted import scripted_runner

pytestmark = pytest.mark.anyio

FIXED: dict[str, bool] = {"agent": False}


def decide(s: AgentSession) -> Action | Final:
    s.record_usage(input_tokens=7, output_tokens=s.trial + 1, cost=0.1 * (s.trial + 1))
    if s.task_id.startswith("broken") and s.trial == 1 and not FIXED["agent"]:
        raise RuntimeError("agent bug")
    if s.task_id.startswith("steps") and len(s.steps) < 2:
        return Action("step", {"n": len(s.steps), "keys": {"b": 1, "a": [1.5, None]}})
    if s.task_id.startswith("loops"):
        return Action("step", {"n": len(s.steps)})  # never done: max_iterations
    # Keys out of order, a tuple, a nested float: as recorded, and as read back.
    return Final({"z": s.trial, "a": (1, 2.0), "é": {"y": -0.0}})


def evaluate(r: TrialRecord) -> Evaluation:
    if r.task_id.startswith("scorer") and r.trial == 0:
        raise ValueError("grader down")
    if r.task_id.startswith("named"):
        return Evaluation(r.trial, r.trial > 0, {"why": [r.trial]}, scores={"f1": 0.5})
    return Evaluation(1.0, r.status == "completed")


TASKS = {
    "plain": BenchmarkTaskMetadata("a", "e"),
    "broken": BenchmarkTaskMetadata("a", "e"),
    "steps": BenchmarkTaskMetadata("a", "e"),
    "loops": BenchmarkTaskMetadata("a", "e", max_iterations=2),
    "scorer": BenchmarkTaskMetadata("a", "e"),
    "named": BenchmarkTaskMetadata("a", "e", dependencies=("plain",)),
}


def runner(store: Path) -> CorralRunner:
    return scripted_runner(TASKS, decide, evaluate, store)


@pytest.fixture
def store_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tasks whose records were read back from the store."""
    reads: list[str] = []
    read = StoreRecords.task_records

    def counted(self: StoreRecords, task_id: str) -> Any:
        reads.append(task_id)
        return read(self, task_id)

    monkeypatch.setattr(StoreRecords, "task_records", counted)
    return reads


def from_the_store(report: Any) -> str:
    """The report's JSON with every record read from the store (the report object is
    built from the store: its records are read when used)."""
    return json.dumps(report.to_dict()) + "\n"


@pytest.mark.parametrize("models", [None, ["m1", "m2"]])
async def test_the_spooled_file_is_the_stored_one(
    tmp_path: Path, store_reads: list[str], models: list[str] | None
) -> None:
    FIXED["agent"] = False
    run = runner(tmp_path / "store.db")
    report = await run.run("b", trials_per_task=3, k_values=(1, 3), models=models)
    path = report_path(run.store, "b")
    assert path is not None
    assert store_reads == []  # the file took every task's records from the spool
    text = path.read_text()
    assert text == from_the_store(report)
    statuses = {t["status"] for task in json.loads(text)["tasks"].values() for t in task["trials"]}
    assert statuses == {"completed", "error", "max_iterations"}

    # A rerun reopens the error trials: a task with trials of an earlier run is read.
    FIXED["agent"] = True
    store_reads.clear()
    again = await runner(tmp_path / "store.db").run(
        "b", trials_per_task=3, k_values=(1, 3), models=models, rerun=("error",)
    )
    assert set(store_reads) == set(again.tasks)
    assert path.read_text() == from_the_store(again)
    broken = [t for task_id, t in again.tasks.items() if task_id.startswith("broken")]
    assert {r.status for task in broken for r in task.trials} == {"completed"}

    # A rescore evaluates every trial again: all from the spool.
    store_reads.clear()
    rescored = await runner(tmp_path / "store.db").rescore("b", k_values=(1, 3))
    assert store_reads == []
    assert path.read_text() == from_the_store(rescored)


async def test_a_subset_run_reads_the_tasks_it_did_not_run(
    tmp_path: Path, store_reads: list[str]
) -> None:
    FIXED["agent"] = False
    await runner(tmp_path / "store.db").run("b", trials_per_task=2)
    store_reads.clear()
    run = runner(tmp_path / "store.db")
    await run.run("b", task_ids=["loops"], trials_per_task=2, rerun=("max_iterations",))
    path = report_path(run.store, "b")
    assert path is not None
    assert sorted(store_reads) == sorted(t for t in TASKS if t != "loops")
    whole = await runner(tmp_path / "store.db").run("b", trials_per_task=2)  # all resumed
    assert path.read_text() == from_the_store(whole)
