"""Paired comparisons of two benchmarks, or of two models in one, on hand-made data."""

from __future__ import annotations

import json

import pytest

import corral
from corral import Comparison, ConfigError, compare

from .reports import hand_made_report, outcomes

A = {
    "t1": outcomes(4, 2),
    "t2": outcomes(4, 4),
    "t3": outcomes(4, 0),
    "t4": outcomes(4, 1),
    "only-a": outcomes(4, 4),
}
B = {
    "t1": outcomes(4, 3),
    "t2": outcomes(4, 2),
    "t3": outcomes(4, 0),
    "t4": outcomes(4, 4),
    "only-b": outcomes(4, 0),
}


def test_the_difference_is_b_minus_a_on_the_shared_tasks() -> None:
    result = compare(hand_made_report("a", A), hand_made_report("b", B))
    assert isinstance(result, Comparison)
    # Deterministic: the same reports, the same interval.
    assert result == corral.compare(hand_made_report("a", A), hand_made_report("b", B))
    assert result.k == 1
    assert result.shared == ("t1", "t2", "t3", "t4")
    assert result.a.value == pytest.approx((0.5 + 1.0 + 0.0 + 0.25) / 4)
    assert result.b.value == pytest.approx((0.75 + 0.5 + 0.0 + 1.0) / 4)
    assert result.difference.value == pytest.approx(0.125)
    assert result.improved == ("t1", "t4")
    assert result.regressed == ("t2",)
    assert result.tied == ("t3",)
    assert result.only_a == ("only-a",) and result.only_b == ("only-b",)
    for e in (result.a, result.b, result.difference):
        assert e.low <= e.value <= e.high
    # Four tasks pulling both ways: no evidence either way.
    assert result.difference.low < 0 < result.difference.high
    assert not result.significant


def test_k_is_any_k_up_to_the_trials_whatever_the_reports_were_built_with() -> None:
    result = compare(hand_made_report("a", A), hand_made_report("b", B), k=2)
    # pass@2 of 4 trials with c passing: 1 - C(4-c, 2)/6.
    a = [5 / 6, 1.0, 0.0, 0.5]
    b = [1.0, 5 / 6, 0.0, 1.0]
    assert result.a.value == pytest.approx(sum(a) / 4)
    assert result.difference.value == pytest.approx((sum(b) - sum(a)) / 4)
    assert result.improved == ("t1", "t4") and result.regressed == ("t2",)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["metric"] == "pass@2" and data["shared"] == 4
    assert data["difference"]["value"] == pytest.approx(0.125)
    assert data["improved"] == ["t1", "t4"] and data["only_b"] == ["only-b"]
    assert data["significant"] is False
    assert data["interval"]["confidence"] == 0.95


def test_a_report_against_itself_differs_by_exactly_nothing() -> None:
    report = hand_made_report("a", A)
    result = compare(report, report)
    assert result.difference == corral.Estimate(0.0, 0.0, 0.0)
    assert result.tied == result.shared and not result.improved and not result.regressed


def _spread(extra: int) -> dict[str, list[bool]]:
    """40 tasks from hopeless to trivial (0..8 of 10 passing), each passing ``extra`` more."""
    return {f"t{i}": outcomes(10, i % 9 + extra) for i in range(40)}


def test_pairing_sees_a_small_consistent_gain_that_the_two_intervals_alone_hide() -> None:
    a, b = hand_made_report("a", _spread(0)), hand_made_report("b", _spread(1))
    result = compare(a, b)
    assert result.difference.value == pytest.approx(0.1)
    assert len(result.improved) == 40
    # Every task gains 0.1: the paired interval is that point, and significant...
    assert result.difference.low == pytest.approx(0.1) and result.significant
    # ...while each side's own interval is wide and they overlap.
    assert result.a.high > result.b.low
    assert result.a == a.scores.pass_at_k[1]


def test_a_mixed_gain_on_many_tasks_is_significant_and_its_interval_is_paired() -> None:
    a = _spread(0)
    # Three tasks in four gain two passes of ten, the fourth loses one.
    b = {t: outcomes(10, max(0, i % 9 + (2 if i % 4 else -1))) for i, t in enumerate(a)}
    a_report, b_report = hand_made_report("a", a), hand_made_report("b", b)
    result = compare(a_report, b_report)
    assert result.regressed and result.improved
    assert 0 < result.difference.low < result.difference.value < result.difference.high
    reverse = compare(b_report, a_report)
    assert reverse.difference.value == pytest.approx(-result.difference.value)
    assert reverse.improved == result.regressed and reverse.regressed == result.improved


def test_two_models_of_one_benchmark_task_by_task() -> None:
    passes = {}
    for i in range(6):
        passes[f"q{i}@small"] = outcomes(3, i % 2)
        passes[f"q{i}@large"] = outcomes(3, 3 if i else 0)
    report = hand_made_report("m", passes, k_values=(1, 3))
    result = compare(report, report, models=("small", "large"))
    assert (result.model_a, result.model_b) == ("small", "large")
    assert result.shared == tuple(f"q{i}" for i in range(6))
    assert result.a.value == pytest.approx(report.by_model["small"][1])
    assert result.b.value == pytest.approx(report.by_model["large"][1])
    assert result.improved == ("q1", "q2", "q3", "q4", "q5")
    assert result.tied == ("q0",)
    # One model across two benchmarks: `model` picks it on both sides.
    other = hand_made_report("m2", {t: outcomes(3, 3) for t in passes}, k_values=(1,))
    same_model = compare(report, other, model="small")
    assert same_model.shared == result.shared
    assert same_model.a.value == pytest.approx(1 / 6) and same_model.b.value == 1.0
    assert len(same_model.improved) == 6 and same_model.significant


def test_tasks_with_fewer_than_k_trials_on_a_side_are_left_out_and_named() -> None:
    a = hand_made_report("a", {"x": outcomes(4, 1), "y": outcomes(2, 1)}, trials_per_task=4)
    b = hand_made_report("b", {"x": outcomes(4, 3), "y": outcomes(4, 4)})
    result = compare(a, b, k=4)
    assert result.shared == ("x",) and result.incomplete == ("y",)
    with pytest.raises(ConfigError, match=r"share no task with at least 4 finished trials"):
        compare(
            hand_made_report("a", {"y": outcomes(2, 1)}, trials_per_task=4),
            b,
            k=4,
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"k": 0}, r"k = 0 is outside 1\.\.4"),
        ({"k": 5}, r"k = 5 is outside 1\.\.4"),
        ({"k": True}, r"k = True"),
        ({"model": "nope"}, r"has no task on model 'nope' \(its models: none\)"),
        ({"model": "x", "models": ("x", "y")}, r"model or models, not both"),
        ({"models": ("x",)}, r"two model names"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        compare(hand_made_report("a", A), hand_made_report("b", B), **kwargs)  # type: ignore[arg-type]


def test_reports_that_share_no_task_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"'a' and 'b' share no task"):
        compare(hand_made_report("a", {"x": [True]}), hand_made_report("b", {"y": [True]}))
