"""The report a run writes beside its store, and the shared objects that keep it small."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import corral
from corral import (
    AgentSession,
    BenchmarkTaskMetadata,
    Commit,
    CorralRunner,
    Evaluation,
    Final,
    RetryPolicy,
    TrialRecord,
    TrialStatus,
)
from corral._records import TrialTable, evaluation_of
from corral.report import build_report
from corral.report._files import report_file_name, report_path, write_report
from corral.testing import FakeEnvironment, ScriptedAgent

from ..support.reports import hand_made_report


def decide(s: AgentSession) -> Final:
    s.record_usage(input_tokens=3, output_tokens=s.trial, cost=0.5)
    if s.task_id.startswith("err") and s.trial == 1:
        raise RuntimeError("no answer")
    return Final({"trial": s.trial, "x": [1, 2.5, None, "é"]})


def evaluate(r: TrialRecord) -> Evaluation:
    if r.task_id.startswith("err") and r.trial == 2:
        raise ValueError("grader down")
    if r.task_id.startswith("det"):
        return Evaluation(0.25 * r.trial, r.trial % 2 == 0, {"why": "because", "n": r.trial})
    if r.task_id.startswith("int"):
        return Evaluation(int(r.trial != 1), r.trial != 1)
    return Evaluation(float(r.trial != 1), r.trial != 1)


TASKS = {
    "parent": BenchmarkTaskMetadata("a", "e"),
    "child": BenchmarkTaskMetadata("a", "e", dependencies=("parent",)),
    "err": BenchmarkTaskMetadata("a", "e", model="m1"),
    "det": BenchmarkTaskMetadata("a", "e2", model="m2", inputs={"prompt": "q"}),
    "int": BenchmarkTaskMetadata("a", "e"),
}


def runner(store: Path) -> CorralRunner:
    envs = {"e": FakeEnvironment(evaluate=evaluate), "e2": FakeEnvironment(evaluate=evaluate)}
    return CorralRunner(
        TASKS,
        {"a": ScriptedAgent(decide)},
        envs,
        store=store,
        retry_policy=RetryPolicy(max_retries=0),
    )


@pytest.mark.anyio
@pytest.mark.parametrize("models", [None, ["m1", "m2"]])
async def test_the_written_report_is_exactly_the_reports_json(
    tmp_path: Path, models: list[str] | None
) -> None:
    selection = ["child", "err", "det", "int"]
    for _ in range(2):  # the second run resumes every trial
        run = runner(tmp_path / "store.db")
        report = await run.run(
            "b/1 x",
            task_ids=selection,
            trials_per_task=3,
            k_values=(1, 3),
            max_parallel_per_task=3,
            models=models,
        )
        path = report_path(run.store, "b/1 x")
        assert path is not None and path.name == report_file_name("b/1 x")
        text = path.read_text()
        assert text == json.dumps(report.to_dict()) + "\n"
        assert sorted(p.name for p in path.parent.iterdir() if p.suffix == ".tmp") == []
    assert report.resumed == 15 * (len(models) if models else 1)
    data = json.loads(text)
    # The file names errors (trial errors and failed evaluations apart) and completeness.
    copies = len(models) if models else 1
    err_ids = [t for t in data["tasks"] if t.startswith("err")]
    assert data["errors"] == [
        {
            "message": "RuntimeError: no answer",
            "count": copies,
            "examples": [f"{t}#1" for t in err_ids],
            "variants": 1,
        }
    ]
    assert [(g["message"], g["count"]) for g in data["evaluation_errors"]] == [
        ("ValueError: grader down", copies)
    ]
    assert (data["finished"], data["total"], data["complete"]) == (15 * copies, 15 * copies, True)
    assert data["wall_seconds"] == data["finished_at"] - data["started_at"] > 0
    assert data["added_by_dependencies"] == [t for t in data["tasks"] if t.startswith("parent")]
    by_id = {t: data["tasks"][t] for t in data["tasks"]}
    err = next(v for t, v in by_id.items() if t.startswith("err"))
    assert [t["status"] for t in err["trials"]] == ["completed", "error", "completed"]
    assert err["trials"][2]["error"] == "evaluation failed: ValueError: grader down"
    det = next(v for t, v in by_id.items() if t.startswith("det"))
    assert det["trials"][2]["evaluation"] == {
        "score": 0.5,
        "passed": True,
        "details": {"why": "because", "n": 2},
    }
    assert det["environment_id"] == "e2"
    int_task = next(v for t, v in by_id.items() if t.startswith("int"))
    assert [t["evaluation"]["score"] for t in int_task["trials"]] == [1, 0, 1]
    assert '"score": 1,' in text and '"score": 1.0,' in text  # int and float scores stay apart


def record(task_id: str, trial: int, passed: bool = True) -> TrialRecord:
    return TrialRecord(
        task_id,
        trial,
        TrialStatus.COMPLETED,
        output=trial,
        evaluation=Evaluation(1.0 if passed else 0.0, passed),
        started_at=1.0,
        finished_at=2.0,
    )


def test_a_report_from_a_table_shares_its_records_and_equals_one_from_a_config() -> None:
    table = TrialTable(3)
    records = [record("a", 0), record("a", 2, passed=False), record("b", 1)]
    records += [record("c", r) for r in range(3)]
    for r in records:
        table.add(r)
    metadata = {
        "a": BenchmarkTaskMetadata("x", "e1", model="m"),
        "b": BenchmarkTaskMetadata("x", "e2"),
        "c": BenchmarkTaskMetadata("x", "e1", model="m"),
        "d": BenchmarkTaskMetadata("x", "e2"),  # no trial finished
    }
    config = {
        "trials_per_task": 3,
        "tasks": {
            t: {"model": m.model, "environment_id": m.environment_id} for t, m in metadata.items()
        },
    }
    when = {"k_values": (1, 2), "started_at": 0.0, "finished_at": 3.0}
    from_table = build_report(
        "b", {"trials_per_task": 3}, records=table, metadata=metadata.items(), **when
    )
    from_config = build_report("b", config, records=dict(table.items()), **when)
    assert from_table.to_dict() == from_config.to_dict()
    assert from_table.counts["unfinished"] == 6
    assert [t.trial for t in from_table.tasks["a"].trials] == [0, 2]
    kept = [table[("c", r)] for r in range(3)]
    assert all(x is y for x, y in zip(from_table.tasks["c"].trials, kept, strict=True))
    assert from_table.tasks["d"].trials == [] and from_table.tasks["d"].pass_at_k == {}
    # Every task keeps its own pass@k mapping, even where the values are equal.
    a, c = from_table.tasks["a"].pass_at_k, from_table.tasks["c"].pass_at_k
    assert a is not c


def test_a_table_lends_a_full_row_and_copies_a_partial_one() -> None:
    table = TrialTable(2)
    full = [record("f", 0), record("f", 1)]
    for r in [*full, record("p", 1)]:
        table.add(r)
    assert table.trials("f") == full
    assert table.trials("f") is table.trials("f")  # the row itself, not a copy
    assert [r.trial for r in table.trials("p")] == [1]
    assert table.trials("missing") == []


def test_a_table_shares_equal_evaluations_without_details_but_keeps_their_json() -> None:
    table = TrialTable(16)
    trial = iter(range(16))

    def kept(score: float, passed: bool, details: dict[str, int] | None = None) -> Evaluation:
        evaluation = scored({"score": score, "passed": passed, "details": details or {}})
        assert evaluation is not None
        r = next(trial)
        table.add(
            TrialRecord("t", r, TrialStatus.COMPLETED, output=r, evaluation=evaluation, state=7)
        )
        shared = table[("t", r)].evaluation
        assert shared is not None and table[("t", r)].state is None
        return shared

    assert kept(1.0, True) is kept(1.0, True)
    assert kept(1.0, True) is not kept(1.0, False)
    assert type(kept(1, True).score) is int and type(kept(1.0, True).score) is float
    assert json.dumps(kept(-0.0, False).score) == "-0.0"
    assert json.dumps(kept(0.0, False).score) == "0.0"
    assert kept(0.5, True, {"n": 1}) is not kept(0.5, True, {"n": 1})
    assert dict(kept(0.5, True, {"n": 1}).details) == {"n": 1}
    assert dict(kept(0.5, True).details) == {}
    assert scored({"error": "boom"}) is None


def scored(payload: dict[str, Any]) -> Evaluation | None:
    """The evaluation a stored evaluation payload records."""
    return evaluation_of(Commit(0, "evaluation", payload, 0.0))


def test_report_file_names_never_collide_and_always_fit() -> None:
    ids = ["a/b", "a_b", "A_b", "a_B", "a b", "a.b", ".a", "résumé", "resume", "x" * 200]
    names = [report_file_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert len(set(n.lower() for n in names)) == len(ids)  # case-insensitive file systems too
    assert names[1] == "a_b.json" and names[-1].startswith("x" * 60 + "~")
    for name in names:
        assert len(name.encode()) < 100 and name.isascii() and "/" not in name
        assert not name.startswith(".")


@pytest.mark.anyio
async def test_a_long_non_ascii_id_writes_its_report(tmp_path: Path) -> None:
    benchmark_id = "évaluation 🚀 " + "ü" * 180
    run = runner(tmp_path / "store.db")
    report = await run.run(benchmark_id, task_ids=["child"])
    path = report_path(run.store, benchmark_id)
    assert path is not None and json.loads(path.read_text()) == report.to_dict()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("", "benchmark_id must be a non-empty string"),
        ("  ", "benchmark_id must be a non-empty string"),
        ("a\nb", "control character"),
        ("a\ud800", "lone surrogate"),
        ("x" * 201, "201 characters long; the limit is 200"),
        (7, "benchmark_id must be a non-empty string, not 7"),
    ],
)
async def test_bad_benchmark_ids_are_refused_before_anything_is_written(
    tmp_path: Path, bad: object, message: str
) -> None:
    run = runner(tmp_path / "store.db")
    with pytest.raises(corral.ConfigError, match=message):
        await run.run(bad)  # type: ignore[arg-type]
    assert not (tmp_path / "store.db").exists()


@pytest.mark.anyio
async def test_a_subset_run_keeps_the_whole_benchmark_in_the_report_file(tmp_path: Path) -> None:
    await runner(tmp_path / "store.db").run("b", trials_per_task=2)
    run = runner(tmp_path / "store.db")
    subset = await run.run("b", task_ids=["int"], trials_per_task=2)
    assert list(subset.tasks) == ["int"]  # the run reports on what it ran
    path = report_path(run.store, "b")
    assert path is not None
    data = json.loads(path.read_text())
    assert sorted(data["tasks"]) == sorted(TASKS)  # the file: the whole benchmark
    assert (data["finished"], data["total"]) == (10, 10)
    assert data["errors"][0]["examples"] == ["err#1"]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["run", "rescore"])
async def test_a_subset_keeps_its_runs_tags_note_and_provenance_in_the_report_file(
    tmp_path: Path, kind: str
) -> None:
    """The file of a subset run (or a ``rescore --task``) is rebuilt with every task
    from the store, and came out with no tags, note, provenance or generation settings,
    though the run recorded them and ``corral report`` (the same JSON) shows them."""
    source = tmp_path / "bench.py"
    source.write_text("# the benchmark's file\n")
    await runner(tmp_path / "store.db").run("b", trials_per_task=2)
    run = runner(tmp_path / "store.db")
    meta = {"tags": ["nightly", "v2"], "note": "shorter prompt"}
    if kind == "run":
        subset = await run.run("b", task_ids=["int"], trials_per_task=2, source=source, **meta)
    else:
        subset = await run.rescore("b", task_ids=["int"], **meta)
    path = report_path(run.store, "b")
    assert path is not None
    data = json.loads(path.read_text())
    assert sorted(data["tasks"]) == sorted(TASKS)
    shown = {k: subset.to_dict()[k] for k in ("tags", "note", "provenance", "generation")}
    assert shown["tags"] == ["nightly", "v2"] and shown["note"] == "shorter prompt"
    assert shown["provenance"]["corral_version"] == corral.__version__
    assert {k: data[k] for k in shown} == shown


def test_a_report_file_is_written_aside_under_a_name_of_its_own(tmp_path: Path) -> None:
    """Two runs writing ``a.json`` and ``a.txt`` in one folder each wrote through
    ``a.json.tmp``: one took the other's half-written file."""
    theirs = tmp_path / "a.json.tmp"
    theirs.write_text("another run's report, half written")
    report = hand_made_report("b", {"t": [True]})
    write_report(tmp_path / "a.txt", report)
    assert theirs.read_text() == "another run's report, half written"
    assert json.loads((tmp_path / "a.txt").read_text())["benchmark_id"] == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json.tmp", "a.txt"]
