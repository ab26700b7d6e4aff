"""Named scores (``Evaluation.scores``) in the report: each name's mean over the tasks
that have it with the same bootstrap interval as pass@k, overall and per model, in the
JSON, the CLI tables and `compare` (paired)."""

from __future__ import annotations

import json
import textwrap
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral import BenchmarkReport, ConfigError, Evaluation, TrialRecord, TrialStatus, compare
from corral.cli import main
from corral.report import build_report, named_scores
from corral.report._bootstrap import bootstrap_means, grouped, percentile_interval
from corral.report._named import task_named_scores

from ..support.reports import hand_made_report

Scored = Mapping[str, float]


def trial(task: str, r: int, scores: Scored, passed: bool = True) -> TrialRecord:
    return TrialRecord(
        task, r, TrialStatus.COMPLETED, evaluation=Evaluation(float(passed), passed, {}, scores)
    )


def scored_report(
    tasks: Mapping[str, Sequence[Scored]], benchmark_id: str = "b"
) -> BenchmarkReport:
    """A report whose task ``t`` has a trial per item of ``tasks[t]`` with those named
    scores (a task ``x@m`` is on model ``m``)."""
    config = {
        "trials_per_task": max(len(v) for v in tasks.values()),
        "tasks": {
            t: {"environment_id": "e", "model": t.rpartition("@")[2] if "@" in t else None}
            for t in tasks
        },
    }
    records = {
        (t, r): trial(t, r, scores)
        for t, trials in tasks.items()
        for r, scores in enumerate(trials)
    }
    return build_report(benchmark_id, config, records=records, k_values=(1,))


def test_a_task_s_score_is_the_mean_over_its_trials_that_have_it() -> None:
    trials = [
        trial("t", 0, {"acc": 1.0, "f1": 0.5}),
        trial("t", 1, {"acc": 0.0}),  # abstained from f1: left out, not counted 0
        TrialRecord("t", 2, TrialStatus.ERROR),  # no evaluation
        trial("t", 3, {"acc": 1.0, "f1": 0.25}),
    ]
    assert task_named_scores(trials) == {"acc": pytest.approx(2 / 3), "f1": pytest.approx(0.375)}
    assert task_named_scores([trial("t", 0, {})]) == {}


def test_the_mean_is_over_the_tasks_that_have_the_score_with_a_bootstrap_interval() -> None:
    values = [0.1, 0.4, 0.4, 0.9, 1.0, 0.0, 0.7, 0.4]
    tasks = [[trial(f"t{i}", 0, {"acc": v})] for i, v in enumerate(values)]
    tasks.append([trial("quiet", 0, {})])  # no named score: not counted
    tasks.append([trial("half", 0, {"f1": 0.5})])
    found = named_scores(tasks)
    assert list(found) == ["acc", "f1"]
    acc = found["acc"]
    assert acc.tasks == len(values)
    assert acc.estimate.value == pytest.approx(sum(values) / len(values))
    # The same expanded percentile bootstrap over tasks as pass@k's.
    counts, columns = grouped(Counter((v,) for v in values))
    dist = bootstrap_means(counts, columns)[0]
    low, high = percentile_interval(dist, acc.estimate.value, len(values))
    assert (acc.estimate.low, acc.estimate.high) == (low, high)
    assert acc.estimate.low < acc.estimate.value < acc.estimate.high
    assert named_scores(tasks) == found  # deterministic
    # One task: nothing to resample.
    assert found["f1"].tasks == 1
    assert found["f1"].estimate.to_dict() == {"value": 0.5, "low": 0.5, "high": 0.5}


def test_equal_scores_give_a_point_interval() -> None:
    found = named_scores([[trial(f"t{i}", 0, {"acc": 0.2})] for i in range(5)])
    assert found["acc"].estimate.to_dict() == {"value": 0.2, "low": 0.2, "high": 0.2}


def test_scores_near_the_largest_float_are_averaged_not_overflowed() -> None:
    """Finite scores whose sum passes the largest float: a task of two trials at
    1.5e308 raised OverflowError in its mean, tasks at 1.5e308 and -1.5e308 a
    ValueError (inf - inf) in the report's, and a sum that only overflowed to inf was
    kept within the values present: a mean of 1.5e308 where it is 1e308."""
    big = 1.5e308
    assert task_named_scores([trial("t", 0, {"x": big}), trial("t", 1, {"x": big})]) == {"x": big}
    report = scored_report({"a": [{"x": big}], "b": [{"x": big}], "c": [{"x": 0.0}]})
    estimate = report.named_scores["x"].estimate
    assert estimate.value == pytest.approx(1e308)
    assert 0.0 <= estimate.low <= estimate.value <= estimate.high <= big
    mixed = scored_report({"a": [{"x": big}], "b": [{"x": big}], "c": [{"x": -big}]})
    estimate = mixed.named_scores["x"].estimate
    assert estimate.value == pytest.approx(0.5e308)
    assert -big <= estimate.low <= estimate.value <= estimate.high <= big
    json.loads(json.dumps(mixed.to_dict()), parse_constant=pytest.fail)  # no NaN, no Infinity


def test_a_report_without_named_scores_has_the_same_json_keys_and_an_empty_mapping() -> None:
    report = hand_made_report("plain", {"t1": [True, False], "t2": [True, True]})
    out = report.to_dict()
    assert out["named_scores"] == {}
    assert report.named_scores == {} and report.named_scores_by_model == {}
    assert "named_scores" not in out["tasks"]["t1"]
    assert list(out)[:8] == [
        "benchmark_id",
        "trials_per_task",
        "k_values",
        "pass_at_k",
        "pass_hat_k",
        "scores",
        "scores_by_model",
        "by_model",
    ]


def test_the_report_gives_each_score_overall_and_per_model() -> None:
    report = scored_report(
        {
            "q1@a": [{"acc": 1.0, "f1": 1.0}, {"acc": 0.0, "f1": 0.5}],
            "q2@a": [{"acc": 1.0, "f1": 0.8}, {"acc": 1.0, "f1": 0.6}],
            "q1@b": [{"acc": 0.0, "f1": 0.2}, {"acc": 0.0}],
            "q2@b": [{"acc": 0.0, "f1": 0.4}, {"acc": 1.0, "f1": 0.0}],
        }
    )
    assert report.named_scores["acc"].estimate.value == pytest.approx((0.5 + 1 + 0 + 0.5) / 4)
    assert report.named_scores["f1"].estimate.value == pytest.approx((0.75 + 0.7 + 0.2 + 0.2) / 4)
    by_model = report.named_scores_by_model
    assert list(by_model) == ["a", "b"]
    assert by_model["a"]["acc"].estimate.value == pytest.approx(0.75)
    assert by_model["b"]["f1"].estimate.value == pytest.approx(0.2)
    out = json.loads(json.dumps(report.to_dict()))
    acc = out["named_scores"]["acc"]
    assert set(acc) == {"value", "low", "high", "tasks", "by_model"}
    assert acc["tasks"] == 4 and set(acc["by_model"]) == {"a", "b"}
    assert acc["by_model"]["a"]["value"] == pytest.approx(0.75)
    assert out["tasks"]["q1@a"]["named_scores"] == {"acc": 0.5, "f1": 0.75}
    # pass@k is untouched beside them.
    assert out["pass_at_k"] == {"1": 1.0}
    # The report's `scores` gives them too, beside pass@k and pass^k.
    assert report.scores["acc"] == report.named_scores["acc"].estimate
    assert "f1" in report.scores and "nope" not in report.scores
    assert report.scores_by_model["b"]["f1"] == by_model["b"]["f1"].estimate
    assert out["scores"]["acc"] == {k: acc[k] for k in ("value", "low", "high", "tasks")}
    assert out["scores_by_model"]["a"]["acc"]["value"] == pytest.approx(0.75)
    with pytest.raises(KeyError, match="'acc', 'f1'"):
        report.scores["nope"]


def test_a_named_score_called_like_a_metric_stays_out_of_the_scores_keys() -> None:
    report = scored_report({"q1": [{"tasks": 1.0, "pass_at_k": 0.5}], "q2": [{"tasks": 0.0}]})
    out = report.to_dict()
    assert out["scores"]["tasks"] == {"1": 2}  # the count of tasks per k, as before
    assert set(out["scores"]["pass_at_k"]) == {"1"}
    assert report.scores["tasks"].value == pytest.approx(0.5)
    assert set(out["named_scores"]) == {"tasks", "pass_at_k"}


def test_compare_pairs_a_named_score_over_the_shared_tasks() -> None:
    a = scored_report({"t1": [{"f1": 0.2}], "t2": [{"f1": 0.5}], "t3": [{"f1": 0.9}], "t4": [{}]})
    b = scored_report(
        {"t1": [{"f1": 0.6}], "t2": [{"f1": 0.5}], "t3": [{"f1": 0.7}], "t4": [{"f1": 1.0}]}
    )
    c = compare(a, b, metric="score:f1")
    assert c.metric == "score:f1" and c.score == "f1"
    assert c.shared == ("t1", "t2", "t3")
    assert c.incomplete == ("t4",)  # no f1 on a's side
    assert c.a.value == pytest.approx((0.2 + 0.5 + 0.9) / 3)
    assert c.b.value == pytest.approx((0.6 + 0.5 + 0.7) / 3)
    assert c.difference.value == pytest.approx((0.4 + 0.0 - 0.2) / 3)
    assert (c.improved, c.regressed, c.tied) == (("t1",), ("t3",), ("t2",))
    assert c.to_dict()["metric"] == "score:f1"
    with pytest.raises(ConfigError, match=r"'acc'.*their named scores: 'f1'"):
        compare(a, b, metric="score:acc")
    with pytest.raises(ConfigError, match="score:NAME"):
        compare(a, b, metric="score:")
    with pytest.raises(ConfigError, match="pass@k"):
        compare(a, b, metric="nonsense")


def test_compare_of_a_named_score_says_when_the_reports_share_no_task_at_all() -> None:
    """Reports with no task in common were refused as sharing no task "with the score
    'f1' on both sides (their named scores: 'f1')": both have it, and nothing said that
    no task is shared; a side with no named score at all was listed as having 'f1'."""
    a = scored_report({"t1": [{"f1": 0.5}]}, "a")
    for b in (scored_report({"t2": [{"f1": 0.6}]}, "b"), scored_report({"t2": [{}]}, "b")):
        with pytest.raises(ConfigError) as refused:
            compare(a, b, metric="score:f1")
        assert str(refused.value) == "'a' and 'b' share no task"
        with pytest.raises(ConfigError, match=r"^'a' and 'b' share no task with at least 1"):
            compare(a, b)  # as pass@k says it


def test_compare_says_the_shared_tasks_lack_the_score_not_that_they_have_fewer() -> None:
    """Shared tasks without the score on a side were counted as having "fewer", the words
    for tasks short of k trials."""
    a = scored_report({"t1": [{}], "t2": [{"f1": 0.5}]})
    b = scored_report({"t1": [{"f1": 0.6}], "t2": [{}]})
    with pytest.raises(ConfigError) as refused:
        compare(a, b, metric="score:f1")
    message = str(refused.value)
    assert "fewer" not in message
    assert message.endswith("(2 shared tasks lack it on a side)")


BENCH = textwrap.dedent(
    """
    import corral
    from corral import BenchmarkTaskMetadata, Final
    from corral.scorers import combine, exact, f1

    ANSWERS = {"a": "the cat sat", "b": "the cat"}

    class Agent:
        async def act(self, session):
            # Model a answers right; model b leaves out a word.
            return Final(ANSWERS[session.model])

    class Env:
        name = "env"

        async def setup(self, session):
            return None

        async def execute(self, action, session):
            return corral.ToolEffect(None)

        evaluate = combine(exact(), f1())

    benchmark = corral.Benchmark(
        tasks={
            f"q{i}": BenchmarkTaskMetadata("agent", "env", model="a", target="the cat sat")
            for i in range(3)
        },
        agents={"agent": Agent()},
        environments={"env": Env()},
        run_defaults={"trials_per_task": 2, "k_values": (1, 2)},
    )
    """
)


def test_the_cli_shows_named_scores_per_model_in_its_tables_json_and_compare(
    tmp_path: Path,
) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH, encoding="utf-8")
    store = str(tmp_path / "s.db")
    args = ["run", str(bench), "--store", store, "--no-progress", "--model", "a,b"]
    args += ["--benchmark-id", "two"]
    result = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output[result.output.index("{") :])
    named = out["named_scores"]
    assert list(named) == ["exact", "f1"]
    assert named["exact"]["value"] == 0.5 and named["exact"]["tasks"] == 6
    assert named["exact"]["by_model"]["a"] == {"value": 1.0, "low": 1.0, "high": 1.0, "tasks": 3}
    assert named["exact"]["by_model"]["b"]["value"] == 0.0
    # "cat" of "cat sat": f1 drops articles.
    assert named["f1"]["by_model"]["b"]["value"] == pytest.approx(2 / 3)
    # `corral report` reads them back from the store, in its table.
    shown = CliRunner().invoke(main, ["report", "two", "--store", store], catch_exceptions=False)
    assert shown.exit_code == 0, shown.output
    assert "named scores" in shown.output
    line = next(x for x in shown.output.splitlines() if "│ f1 " in x)
    assert "0.83 [" in line and "1.00 [1.00, 1.00]" in line and "0.67 [0.67, 0.67]" in line
    again = CliRunner().invoke(
        main, ["report", "two", "--store", store, "--json"], catch_exceptions=False
    )
    assert json.loads(again.output[again.output.index("{") :])["named_scores"] == named
    # compare, paired over the shared tasks: model b against model a.
    compared = CliRunner().invoke(
        main,
        ["compare", "two", "--models", "a", "b", "--metric", "score:f1", "--store", store],
        catch_exceptions=False,
    )
    assert compared.exit_code == 0, compared.output
    assert "score:f1" in compared.output and "-0.333" in compared.output
    as_json = CliRunner().invoke(
        main,
        [
            "compare",
            "two",
            "--models",
            "a",
            "b",
            "--metric",
            "score:exact",
            "--json",
            "--store",
            store,
        ],
        catch_exceptions=False,
    )
    c = json.loads(as_json.output)
    assert (c["metric"], c["shared"], c["difference"]["value"]) == ("score:exact", 3, -1.0)


HUGE = textwrap.dedent(
    """
    import corral
    from corral import BenchmarkTaskMetadata, Evaluation, Final

    class Agent:
        async def act(self, session):
            return Final(session.model)

    class Env:
        name = "env"

        async def setup(self, session):
            return None

        async def execute(self, action, session):
            return corral.ToolEffect(None)

        async def evaluate(self, trial):
            # Finite scores whose difference (b - a) passes the largest float.
            big = 1e308 if trial.output == "b" else -1e308
            return Evaluation(1.0, True, {}, {"big": big})

    benchmark = corral.Benchmark(
        tasks={f"q{i}": BenchmarkTaskMetadata("agent", "env") for i in range(2)},
        agents={"agent": Agent()},
        environments={"env": Env()},
    )
    """
)


def test_compare_json_stays_strict_json_when_the_difference_overflows(tmp_path: Path) -> None:
    """A difference of two finite named scores may pass the largest float: ``--json``
    still writes JSON (``"inf"``, as the viewer does), not Python's ``Infinity``."""
    bench = tmp_path / "bench.py"
    bench.write_text(HUGE, encoding="utf-8")
    store = str(tmp_path / "s.db")
    args = ["run", str(bench), "--store", store, "--no-progress", "--model", "a,b"]
    ran = CliRunner().invoke(main, [*args, "--benchmark-id", "h"], catch_exceptions=False)
    assert ran.exit_code == 0, ran.output
    args = ["compare", "h", "--models", "a", "b", "--metric", "score:big", "--store", store]
    compared = CliRunner().invoke(main, [*args, "--json"], catch_exceptions=False)
    assert compared.exit_code == 0, compared.output

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    c = json.loads(compared.output, parse_constant=refuse)
    assert c["difference"]["value"] == "inf"
    assert c["a"]["value"] == -1e308 and c["b"]["value"] == 1e308


def test_a_report_from_heads_counts_tasks_in_their_order_not_their_ids() -> None:
    """The heads come in id order; the report's tasks, outcomes per model and named
    scores (each name first met in task order, the key order of the report's JSON) are
    in the tasks' order, as the records' report has them."""
    from corral.report._build import report_from_heads
    from corral.store._heads import TrialHead

    scores: list[Scored] = [{"z": 1e16}, {"y": 1.0}, {"z": -1e16}, {"x": 0.5}, {}, {"w": 1.0}]
    ids = [f"t{9 - i}@m{i % 2}" for i in range(len(scores))]  # ids against their order
    outcomes = [True, False, True, True, False, True]
    config = {
        "trials_per_task": 1,
        "tasks": {t: {"environment_id": "e", "model": t.rpartition("@")[2]} for t in ids},
    }
    records = {(t, 0): trial(t, 0, s, p) for t, s, p in zip(ids, scores, outcomes, strict=True)}
    heads = sorted(
        TrialHead(t, 0, 3, True, "completed", p, float(p), s or None, started_at=0.0)
        for t, s, p in zip(ids, scores, outcomes, strict=True)
    )
    times = {"started_at": 0.0, "finished_at": 1.0, "k_values": (1,)}
    from_records = build_report("b", config, records=records, **times)
    # No trial record is read: a source that has none.
    from_heads = report_from_heads("b", config, heads, object(), **times)  # type: ignore[arg-type]
    assert json.dumps(from_heads.to_dict(tasks=False)) == json.dumps(
        from_records.to_dict(tasks=False)
    )
    assert list(from_heads.tasks) == ids
    assert [(t.pass_at_k, t.extra, t.model) for t in from_heads.tasks.values()] == [
        (t.pass_at_k, t.extra, t.model) for t in from_records.tasks.values()
    ]
