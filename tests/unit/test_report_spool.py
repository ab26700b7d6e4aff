"""The report file takes the records the run kept as its trials finished
(`corral.report._spool.RecordSpool`) and is byte for byte the file the store's records
give: every report file a run writes here is written a second time with every record
read from the store, and the two compared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import corral
import corral._runner
from corral import (
    Action,
    AgentSession,
    BenchmarkTaskMetadata,
    CorralRunner,
    Evaluation,
    Final,
    MemoryStore,
    TrialRecord,
    Usage,
)
from corral.report import _model, _spool, _tasks
from corral.report._files import report_path, write_report
from corral.report._lazy import StoreRecords
from corral.testing import FakeEnvironment, ScriptedAgent
from corral.testing._fault_store import FaultStore

from ..support.scripted import scripted_runner

pytestmark = pytest.mark.anyio

FIXED: dict[str, bool] = {"agent": False}


def decide(s: AgentSession) -> Action | Final:
    s.record_usage(input_tokens=7, output_tokens=s.trial + 1, cost=0.1 * (s.trial + 1))
    if s.task_id.startswith("broken") and s.trial == 1 and not FIXED["agent"]:
        raise RuntimeError("agent bug")
    if s.task_id.startswith("steps") and len(s.steps) < 2:
        return Action("step", {"n": len(s.steps), "keys": {"b": 1, "a": [1.5, None]}})
    if s.task_id.startswith("loops") and not FIXED["agent"]:
        return Action("step", {"n": len(s.steps)})  # never done: max_iterations
    # Keys out of order, a tuple, a nested float: as recorded, and as read back.
    return Final({"z": s.trial, "a": (1, 2.0), "é": {"y": -0.0}})


def evaluate(r: TrialRecord) -> Evaluation:
    if r.task_id.startswith("scorer") and r.trial == 0:
        raise ValueError("grader down")
    if r.task_id.startswith("named"):
        return Evaluation(r.trial, r.trial > 0, {"why": [r.trial]}, scores={"f1": 0.5})
    # A model-graded scorer's spend: added to the trial's usage (after earlier attempts').
    return Evaluation(1.0, r.status == "completed", usage=Usage(cost=0.6))


TASKS = {
    "plain": BenchmarkTaskMetadata("a", "e"),
    "broken": BenchmarkTaskMetadata("a", "e"),
    "steps": BenchmarkTaskMetadata("a", "e"),
    "loops": BenchmarkTaskMetadata("a", "e", max_iterations=2),
    "scorer": BenchmarkTaskMetadata("a", "e"),
    "named": BenchmarkTaskMetadata("a", "e", dependencies=("plain",)),
}


def runner(store: Any) -> CorralRunner:
    return scripted_runner(TASKS, decide, evaluate, store)


class Written:
    """Every report file the runner writes, written again from the store alone: the
    two texts, and which tasks the spool did not serve (read from the store)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        self.files: list[tuple[str, str]] = []
        self.read: list[str] = []
        self._tmp = tmp_path
        read = StoreRecords.task_records

        def counted(records: StoreRecords, task_id: str) -> Any:
            self.read.append(task_id)
            return read(records, task_id)

        def written(path: Path, report: Any, spool: Any = None) -> None:
            self.read.clear()
            write_report(path, report, spool)
            served = list(self.read)
            again = self._tmp / f"again-{len(self.files)}.json"
            write_report(again, report)
            self.files.append((path.read_text(), again.read_text()))
            self.read[:] = served

        monkeypatch.setattr(StoreRecords, "task_records", counted)
        monkeypatch.setattr(corral._runner, "write_report", written)

    def last(self) -> tuple[str, str]:
        return self.files[-1]


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Written:
    FIXED["agent"] = False
    return Written(monkeypatch, tmp_path)


@pytest.mark.parametrize("models", [None, ["m1", "m2"]])
async def test_the_spooled_file_is_the_stored_one(
    tmp_path: Path, written: Written, models: list[str] | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_model, "_WRITTEN", 9)  # a write of one or two tasks
    run = runner(tmp_path / "store.db")
    report = await run.run("b", trials_per_task=3, k_values=(1, 3), models=models)
    assert written.read == []  # the file took every task's records from the spool
    spooled, stored = written.last()
    assert spooled == stored
    path = report_path(run.store, "b")
    assert path is not None and path.read_text() == json.dumps(report.to_dict()) + "\n"
    tasks = json.loads(spooled)["tasks"].values()
    statuses = {t["status"] for task in tasks for t in task["trials"]}
    assert statuses == {"completed", "error", "max_iterations"}

    # A rerun reopens trials (their earlier attempts' usage and the scorer's spend
    # summed as the store sums them: not from the spool), then a rescore (read).
    FIXED["agent"] = True
    again = await runner(tmp_path / "store.db").run(
        "b", trials_per_task=3, k_values=(1, 3), models=models, rerun=("error", "max_iterations")
    )
    assert len(written.files) == 2 and written.last()[0] == written.last()[1]
    loops = [t for task_id, t in again.tasks.items() if task_id.startswith("loops")]
    assert {r.status for task in loops for r in task.trials} == {"completed"}
    await runner(tmp_path / "store.db").rescore("b", k_values=(1, 3))
    assert len(written.files) == 3 and written.last()[0] == written.last()[1]


async def test_tasks_of_one_outcome_share_their_text_and_the_file_is_one_dump(
    tmp_path: Path, written: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report file writes what tasks of one outcome and model share once (all but
    the task's id): ids that JSON escapes, two models, tasks with named scores, a
    broken trial's other outcome between them, more groups than it keeps, written a
    few tasks at a write; byte for byte as one `json.dumps` of the report, and as the
    store's records give it."""
    monkeypatch.setattr(_tasks, "_GROUPS_KEPT", 2)
    monkeypatch.setattr(_model, "_WRITTEN", 10)
    ids = [f'plain-é-"{i}"\\' for i in range(5)] + ["named-a", "broken-é", "plain-z", "named-b"]
    tasks = {t: BenchmarkTaskMetadata("a", "e") for t in ids}
    run = scripted_runner(tasks, decide, evaluate, tmp_path / "store.db")
    made = []
    entries = _tasks.TaskColumns.entries

    def counted(columns: Any, metrics: Any) -> Any:
        for entry in entries(columns, metrics):
            made.append(entry[0])
            yield entry

    monkeypatch.setattr(_tasks.TaskColumns, "entries", counted)
    report = await run.run("b", trials_per_task=2, k_values=(1, 2), models=["m1", "m2"])
    assert len(made) == 2 * len(ids)  # the file's entries came from the columns
    spooled, stored = written.last()
    assert spooled == stored == json.dumps(report.to_dict()) + "\n"
    assert isinstance(report.tasks, _tasks.TaskColumns)


async def test_a_subset_run_s_own_file_is_the_whole_benchmark_s(
    tmp_path: Path, written: Written
) -> None:
    await runner(tmp_path / "store.db").run("b", trials_per_task=2)
    FIXED["agent"] = True
    await runner(tmp_path / "store.db").run(
        "b", task_ids=["loops"], trials_per_task=2, rerun=("max_iterations",)
    )
    spooled, stored = written.last()
    assert spooled == stored and sorted(json.loads(spooled)["tasks"]) == sorted(TASKS)
    assert sorted(written.read) == sorted(TASKS)  # reopened trials and others' are read


async def test_a_rerun_whose_new_evaluation_fails_to_land_writes_it_again(
    tmp_path: Path, written: Written
) -> None:
    """Before, the retry of an evaluation whose append failed took any evaluation in the
    trial's history for its own: one from before the reopen marker. The new one was
    never written (the trial stayed unscored in the store), while the run, and its
    report file, called it scored."""
    memory = MemoryStore()
    path = tmp_path / "r.json"
    tasks = {"x": BenchmarkTaskMetadata("a", "e", max_iterations=1)}
    first = scripted_runner(tasks, decide_loops, evaluate, memory)
    await first.run("b", trials_per_task=2, report_file=path)
    FIXED["agent"] = True
    flaky = FaultStore(memory, kind="evaluation", error=ConnectionError("flaky"))
    again = CorralRunner(
        tasks,
        {"a": ScriptedAgent(decide_loops)},
        {"e": FakeEnvironment(evaluate=evaluate)},
        store=flaky,
        retry_policy=corral.RetryPolicy(max_retries=2, backoff_base=0.001, backoff_cap=0.001),
    )
    report = await again.run("b", trials_per_task=2, rerun=("max_iterations",), report_file=path)
    assert flaky.fired
    assert report.counts["completed"] == 2 and report.finished == 2  # both scored, stored
    assert written.last()[0] == written.last()[1]


def decide_loops(s: AgentSession) -> Action | Final:
    s.record_usage(input_tokens=2, cost=0.1)
    if s.trial == 1 and not FIXED["agent"]:
        return Action("step", {"n": len(s.steps)})  # max_iterations
    return Final({"t": s.trial})


class FullDisk:
    """A spool file on a disk that fills up after ``room`` writes."""

    def __init__(self, room: int) -> None:
        self.room = room

    def write(self, data: bytes) -> int:
        if self.room <= 0:
            raise OSError(28, "No space left on device")
        self.room -= 1
        return len(data)

    def close(self) -> None:
        raise OSError(28, "No space left on device")  # flushing what it holds


async def test_a_full_disk_stops_the_spool_not_the_run(
    tmp_path: Path, written: Written, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The spool gives up (every task read from the store); the run finishes, and a
    close that fails hides nothing."""
    monkeypatch.setattr(_spool.tempfile, "TemporaryFile", lambda **_: FullDisk(room=3))
    report = await runner(tmp_path / "store.db").run("b", trials_per_task=2)
    assert report.finished == report.total == 12
    assert sorted(written.read) == sorted(TASKS)
    assert written.last()[0] == written.last()[1]


class _Record:
    """What the spool takes of a trial record: its trial and its dict."""

    def __init__(self, task: int, trial: int, version: int = 0) -> None:
        self.trial = trial
        self.text = {"task": task, "trial": trial, "v": version, "pad": "é" * (task % 7)}

    def to_dict(self) -> dict[str, Any]:
        return self.text


def test_the_spool_reads_texts_together_or_one_by_one_as_they_lie(tmp_path: Path) -> None:
    """Texts read a block of tasks at once (where they lie close) or one by one (a
    trial spooled far from its task's, a record replaced, tasks asked out of order)
    are each trial's latest text."""
    tasks = [f"t{i}" for i in range(700)]
    spool = _spool.RecordSpool(tasks, 2, tmp_path)
    latest: dict[tuple[int, int], str] = {}

    def add(t: int, r: int, version: int = 0) -> None:
        record = _Record(t, r, version)
        spool.add(t, record)  # type: ignore[arg-type]
        latest[(t, r)] = json.dumps(record.text)

    late = {(3, 1), (300, 0), (699, 1)}
    for t in range(0, 700, 10):  # about in task order, shuffled within tens
        for u in reversed(range(t, t + 10)):
            for r in (1, 0):
                if (u, r) not in late:
                    add(u, r)
    for t, r in late:
        add(t, r)
    add(5, 0, version=1)  # replaced: its latest text is at the end
    expected = [[latest[(t, 0)], latest[(t, 1)]] for t in range(700)]
    try:
        assert [spool.texts(task, 2) for task in tasks] == expected
        assert spool.texts("t9", 1) is None  # not every finished trial
        order = [*range(699, 600, -1), *range(0, 700, 3)]
        assert [spool.texts(tasks[t], 2) for t in order] == [expected[t] for t in order]
    finally:
        spool.close()


def test_texts_that_are_not_ascii_are_read_one_by_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A block is sliced as ASCII text (what the report's encoder writes); texts of
    other characters (an encoder that keeps them) are each read and decoded whole."""
    monkeypatch.setattr(_spool, "dumps_for_report", lambda v: json.dumps(v, ensure_ascii=False))
    tasks = [f"t{i}" for i in range(5)]
    spool = _spool.RecordSpool(tasks, 1, tmp_path)
    for t in range(5):
        spool.add(t, _Record(t, 0))  # type: ignore[arg-type]
    try:
        texts = [spool.texts(task, 1) for task in tasks]
        assert texts == [[json.dumps(_Record(t, 0).text, ensure_ascii=False)] for t in range(5)]
        assert "é" in texts[1][0]  # type: ignore[index]
    finally:
        spool.close()
