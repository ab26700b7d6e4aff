"""The CLI's tables with long ids: a benchmark, task or model id may be 200 characters,
and the table it heads or labels must still show every other column. Rich gave the
id's unwrappable column its whole width and, the table being wider than the console,
cut every other column down evenly, to nothing: `corral list` lost every benchmark's
counts, the report every task's model, env, passed and pass@k."""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner
from rich.console import Console
from rich.table import Table

import corral
from corral import BenchmarkTaskMetadata, Evaluation, Final, TrialRecord, TrialStatus
from corral.cli import main
from corral.cli._compare import render_comparison
from corral.cli._execute import PIPE_WIDTH
from corral.cli._tables import (
    errors_table,
    models_table,
    named_scores_table,
    report_summary,
    report_table,
    scores_table,
)
from corral.progress._view import _limits
from corral.report import build_report
from corral.store import SQLiteStore

from ..support.reports import hand_made_report
from ..support.scripted import scripted_runner

#: A task id as a dataset of repositories may give one (101 characters).
LONG_TASK = "repo/" + "a-fairly-long-task-name-" * 4
#: Model ids as providers name them.
MODELS = (
    "accounts/fireworks/models/llama-v3p1-405b-instruct",
    "accounts/fireworks/models/qwen2p5-72b-instruct",
    "meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo",
)


def _lines(renderable: Any) -> list[str]:
    """What a pipe shows (`PIPE_WIDTH` columns), each line's cells as words."""
    console = Console(record=True, width=PIPE_WIDTH)
    console.print(renderable)
    return [" ".join(line.replace("│", " ").split()) for line in console.export_text().splitlines()]


def _row(table: Table, starts: str) -> str:
    found = [line for line in _lines(table) if line.startswith(starts)]
    assert found, "\n".join(_lines(table))
    return found[0]


def test_a_long_task_id_leaves_the_report_tables_other_columns() -> None:
    passes = {LONG_TASK: [True, False], "short": [True, True]}
    report = hand_made_report("b", passes, k_values=(1, 2))
    assert _row(report_table(report), "short ") == "short - e 2/2 1.00 1.00 1.00"
    assert _row(report_table(report), "mean of 2 tasks") == "mean of 2 tasks 3/4 0.75 1.00 0.50"
    by_model = {f"{LONG_TASK}@x": [True, False], "short@x": [True], "short@y": [False]}
    table = models_table(hand_made_report("m", by_model, trials_per_task=2))
    assert _row(table, "short ") == "short 1/1 1.00 0/1 0.00"
    # The long id is folded over lines, not cut.
    assert LONG_TASK in "".join(line.split()[0] for line in _lines(report_table(report))[3:6])


def test_long_model_names_leave_the_table_of_means_its_labels_and_overall_column() -> None:
    passes = {f"q{i}@{m}": [True, i % 2 == 0] for i in range(2) for m in MODELS}
    table = scores_table(hand_made_report("m", passes, k_values=(1, 2)))
    assert table is not None
    assert _row(table, "pass@1 ").startswith("pass@1 0.75 [0.50, 1.00] 0.75 [0.50, 1.00]")
    assert _row(table, "pass^2 ").startswith("pass^2 0.50 [0.00, 1.00]")


def test_long_model_names_leave_the_named_scores_table_its_labels() -> None:
    records = {
        (f"q{i}@{m}", 0): TrialRecord(
            f"q{i}@{m}",
            0,
            TrialStatus.COMPLETED,
            evaluation=Evaluation(1.0, True, scores={"f1": 0.5}),
            commits=3,
        )
        for i in range(2)
        for m in MODELS
    }
    config = {
        "trials_per_task": 1,
        "tasks": {t: {"environment_id": "e", "model": t.split("@", 1)[1]} for t, _ in records},
    }
    table = named_scores_table(build_report("n", config, records=records, k_values=(1,)))
    assert table is not None
    assert _row(table, "f1 ").startswith("f1 0.50 [0.50, 0.50] · 6")


def test_a_long_benchmark_id_leaves_the_comparisons_columns() -> None:
    a = hand_made_report("a" * 200, {"q0": [True, False], "q1": [False, False]})
    b = hand_made_report("b", {"q0": [True, True], "q1": [True, False]})
    line = _row(render_comparison(corral.compare(a, b)), "mean pass@1")
    assert line == "mean pass@1 0.25 [0.00, 0.50] 0.75 [0.50, 1.00] +0.500 [+0.500, +0.500]"


def test_list_keeps_every_benchmarks_counts_beside_a_long_id(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    config = {"trials_per_task": 2, "tasks": {"t": {"agent_id": "a", "environment_id": "e"}}}

    async def go() -> None:
        opened = SQLiteStore(store)
        async with opened.opened():
            await opened.register_benchmark("x" * 200, config)
            await opened.register_benchmark("short", config)

    anyio.run(go)
    result = CliRunner().invoke(main, ["list", "--store", str(store)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = [" ".join(line.replace("│", " ").split()) for line in result.output.splitlines()]
    short = [row for row in rows if row.startswith("short ")]
    assert len(short) == 1 and short[0].endswith(" 1 2 0/2"), result.output
    assert "x" * 200 in "".join(row.split()[0] for row in rows if row.startswith("x"))


def test_a_long_task_id_among_the_examples_leaves_the_errors_count_and_message() -> None:
    records = {
        (task, r): TrialRecord(task, r, TrialStatus.ERROR, error="RuntimeError: refused", commits=2)
        for task in (LONG_TASK, "short")
        for r in range(2)
    }
    config = {"trials_per_task": 2, "tasks": {t: {"environment_id": "e"} for t, _ in records}}
    table = errors_table(build_report("b", config, records=records, k_values=(1,)), None)
    assert table is not None
    assert _row(table, "4 ").startswith("4 RuntimeError: refused"), "\n".join(_lines(table))


def _unspaced(renderable: Any, width: int = PIPE_WIDTH) -> str:
    """Every line of ``renderable`` at ``width`` columns, spaces and rules taken out: a
    folded value reads whole again, a cut one (``…``) does not."""
    console = Console(record=True, width=width)
    console.print(renderable)
    return "".join(console.export_text().replace("│", "").split())


def test_the_run_summary_keeps_a_long_report_path_and_resume_command_whole() -> None:
    """The summary's values were cut (``…``) at the console's edge: a long report path,
    or the ``--benchmark-id`` of the command that goes on, lost its end."""
    report = replace(hand_made_report("b-" + "x" * 150, {"t": [True]}), stopped="run_cost_limit")
    path = Path("/data/" + "nested-folder/" * 8 + "reports/b-" + "x" * 150 + ".json")
    shown = _unspaced(report_summary(report, path, live=True))
    assert str(path) in shown
    assert "--benchmark-id" + report.benchmark_id + "tocontinue" in shown


def test_show_keeps_a_long_task_model_and_parent_id_whole(tmp_path: Path) -> None:
    """``corral show``'s header cut the trial's task id, its model and the parent it
    took an output from at the console's edge (``…``): two long ids alike but for
    their ends read the same."""
    parent, child = LONG_TASK + "-parent", LONG_TASK + "-child"
    model = MODELS[0] + "-" + "long-context-" * 4 + "v2"
    tasks = {
        parent: BenchmarkTaskMetadata("a", "e", model=model),
        child: BenchmarkTaskMetadata("a", "e", model=model, dependencies=(parent,)),
    }
    store = tmp_path / "s.db"
    runner = scripted_runner(tasks, lambda s: Final(1), lambda r: Evaluation(1.0, True), store)
    anyio.run(functools.partial(runner.run, "b"))
    args = ["show", "b", child, "0", "--store", str(store)]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "…" not in result.output, result.output
    shown = "".join(result.output.split())
    for whole in (child + "#0ofb", "model" + model, parent):
        assert whole in shown, result.output


def test_the_live_display_keeps_long_model_ids_apart() -> None:
    """The live display's limits cut a long model id (or scope name) at the console's
    edge: two models alike but for their ends showed the same row label."""
    a, b = (MODELS[0] + "-" + "long-context-" * 3 + end for end in ("v1", "v2"))
    limits = corral.Limits.resolve(max_parallel=8, max_parallel_by_model={a: 4, b: 2})
    statistics = corral.Statistics(
        executing=3,
        evaluating=0,
        ready=0,
        awaiting_evaluation=0,
        finished=0,
        total=9,
        by_model={a: 2, b: 1},
        by_environment={},
        evaluations_by_environment={},
    )
    scope = "judge-" + "pool-" * 20 + "end"
    scopes = {scope: corral.ScopeStatistics(scope, limit=3, in_use=1, waiting=0, peak=1)}
    shown = _unspaced(_limits(statistics, limits, scopes), width=80)
    assert "…" not in shown
    for whole in (a, b, scope):
        assert whole in shown, shown


def test_list_keeps_long_tags_whole(tmp_path: Path) -> None:
    """`corral list` cut a long tag at its column's edge (``…``): two tags alike but for
    their ends read the same, and neither could be copied to ``--tag``."""
    tags = ["nightly-" + "x" * 90 + "-a", "nightly-" + "x" * 90 + "-b"]
    store = tmp_path / "s.db"
    tasks = {"t": BenchmarkTaskMetadata("a", "e")}
    runner = scripted_runner(tasks, lambda s: Final(1), lambda r: Evaluation(1.0, True), store)
    for benchmark_id, tag in zip(("one", "two"), tags, strict=True):
        anyio.run(functools.partial(runner.run, benchmark_id, tags=[tag]))
    result = CliRunner().invoke(main, ["list", "--store", str(store)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "…" not in result.output, result.output
    shown = "".join(result.output.replace("│", "").split())
    for tag in tags:
        assert tag in shown, result.output
