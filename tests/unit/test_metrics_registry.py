"""A new report metric is one registration: a `Metric` value, nothing else."""

from __future__ import annotations

import pytest
from rich.console import Console

from corral import BenchmarkReport, ConfigError, Evaluation, TrialRecord, TrialStatus
from corral.cli._compare import render_comparison
from corral.cli._tables import report_renderables
from corral.report import build_report, compare, pass_at_k
from corral.report._metrics import METRICS, Metric

#: Made up for the test: pass@k as if one of the passes had failed.
PESSIMIST = Metric(
    "pessimist@k",
    "pessimist_at_k",
    lambda n, c, k: pass_at_k(n, max(c - 1, 0), k),
    "pass@k with one pass fewer",
)
REGISTRY = (*METRICS, PESSIMIST)


def _report(benchmark_id: str, passes: dict[str, list[bool]]) -> BenchmarkReport:
    config = {
        "trials_per_task": 4,
        "tasks": {t: {"environment_id": "e", "model": None} for t in passes},
    }
    records = {
        (t, r): TrialRecord(t, r, TrialStatus.COMPLETED, evaluation=Evaluation(float(ok), ok))
        for t, outcomes in passes.items()
        for r, ok in enumerate(outcomes)
    }
    return build_report(benchmark_id, config, records=records, k_values=(1, 2), metrics=REGISTRY)


A = {"x": [True, True, False, False], "y": [True] * 4, "z": [False] * 4}
B = {"x": [True] * 4, "y": [True] * 4, "z": [True, False, False, False]}


def test_a_registered_metric_is_in_every_figure_table_and_comparison() -> None:
    report = _report("a", A)
    # Per task and its mean, beside the built-ins (which are unchanged).
    assert report.tasks["x"].values["pessimist@k"] == {1: 0.25, 2: 0.5}
    assert report.tasks["y"].values["pessimist@k"] == {1: 0.75, 2: 1.0}
    assert report.means["pessimist@k"] == {1: 1 / 3, 2: 0.5}
    assert report.pass_at_k == {1: 0.5, 2: (5 / 6 + 1 + 0) / 3}
    # Its interval, overall, and the JSON under its key.
    estimate = report.scores.estimates["pessimist@k"][2]
    assert estimate.low < estimate.value == 0.5 < estimate.high
    data = report.to_dict()
    assert data["pessimist_at_k"] == {"1": 1 / 3, "2": 0.5}
    assert data["scores"]["pessimist_at_k"]["2"]["value"] == 0.5
    assert data["tasks"]["x"]["pessimist_at_k"] == {"1": 0.25, "2": 0.5}
    assert data["by_model_pessimist_at_k"] == {}
    # The CLI tables: a column per k, its row of intervals, its meaning in the title.
    console = Console(width=200, record=True)
    console.print(*report_renderables(report, None))
    text = console.export_text()
    assert "pessimist@1" in text and "pessimist@2" in text
    assert "pessimist@k: pass@k with one pass fewer" in text
    assert "pass^2" in text and "pass@2" in text
    # `compare` by its name.
    comparison = compare(report, _report("b", B), k=1, metric="pessimist@k", metrics=REGISTRY)
    assert comparison.metric == "pessimist@1"
    assert comparison.a.value == 1 / 3 and comparison.b.value == 0.5
    assert comparison.improved == ("x",) and comparison.tied == ("y", "z")
    console.print(render_comparison(comparison))
    assert "mean pessimist@1" in console.export_text()


@pytest.mark.parametrize(
    ("metrics", "message"),
    [
        ((), "metrics must hold at least one Metric, not none"),
        ((*METRICS, METRICS[0]), "two metrics have the name 'pass@k'"),
        (
            (*METRICS, Metric("other@k", "pass_at_k", pass_at_k, "x")),
            "two metrics have the key 'pass_at_k'",
        ),
    ],
)
def test_a_bad_set_of_metrics_is_refused(metrics: tuple[Metric, ...], message: str) -> None:
    config = {"trials_per_task": 1, "tasks": {"x": {}}}
    with pytest.raises(ConfigError, match=message):
        build_report("b", config, records={}, k_values=(1,), metrics=metrics)
