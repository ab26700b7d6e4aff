"""pass^k against its formula, the bootstrap behind every interval, and its coverage."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from fractions import Fraction
from math import comb
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import corral
from corral import Estimate, pass_at_k, pass_hat_k
from corral.report import task_scores
from corral.report._bootstrap import (
    binomial,
    bootstrap_means,
    multinomial,
    percentile_interval,
    t_quantile,
)

from ..support.reports import hand_made_report, outcomes


@pytest.mark.parametrize("n", range(1, 11))
def test_pass_hat_k_is_c_choose_k_over_n_choose_k(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            exact = Fraction(comb(c, k), comb(n, k))
            assert pass_hat_k(n, c, k) == pytest.approx(float(exact), rel=1e-12, abs=0)
    assert pass_hat_k(3, 2, 2) == pytest.approx(1 / 3)  # of the 3 pairs, 1 is both passing
    assert pass_hat_k(200, 100, 100) == pytest.approx(float(Fraction(1, comb(200, 100))))


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_hat_k_refuses_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


@pytest.mark.parametrize("estimator", [pass_at_k, pass_hat_k])
@pytest.mark.parametrize(
    ("n", "c", "k", "named"),
    [(3, 1, 4, "4"), (3, 4, 1, "4"), (3, 1, 0, "0"), (3, 1, 1.5, "1.5"), (3, True, 1, "True")],
)
def test_pass_at_k_refuses_bad_counts_with_a_config_error_naming_them(
    estimator: Any, n: int, c: int, k: int, named: str
) -> None:
    # SPEC section 1: every refusal of bad input is a corral.ConfigError naming the value;
    # 3.5: k must be a positive integer (1.5 was a TypeError from math.comb naming no value).
    with pytest.raises(corral.ConfigError, match=re.escape(named)):
        estimator(n, c, k)


@st.composite
def counts(draw: st.DrawFn) -> tuple[int, int, int]:
    n = draw(st.integers(1, 60))
    return n, draw(st.integers(0, n)), draw(st.integers(1, n))


@given(counts())
def test_pass_hat_k_never_exceeds_pass_at_k_and_they_meet_at_k_1(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    assert 0.0 <= pass_hat_k(n, c, k) <= pass_at_k(n, c, k) <= 1.0
    assert pass_hat_k(n, c, 1) == pass_at_k(n, c, 1) == c / n
    # Every one of k passes <=> not (at least one of k fails).
    assert pass_hat_k(n, c, k) == pytest.approx(1.0 - pass_at_k(n, n - c, k), abs=1e-12)
    if k < n:  # one more trial that must pass can only lower it
        assert pass_hat_k(n, c, k + 1) <= pass_hat_k(n, c, k)


def test_a_report_gives_pass_hat_k_per_task_and_its_mean_beside_pass_at_k() -> None:
    report = hand_made_report("b", {f"c{c}": outcomes(4, c) for c in range(5)}, k_values=(1, 2, 4))
    for c in range(5):
        task = report.tasks[f"c{c}"]
        assert task.pass_hat_k == pytest.approx({k: comb(c, k) / comb(4, k) for k in (1, 2, 4)})
        assert task.pass_hat_k[1] == task.pass_at_k[1]
    assert report.pass_hat_k == pytest.approx(
        {k: sum(comb(c, k) / comb(4, k) for c in range(5)) / 5 for k in (1, 2, 4)}
    )
    assert report.pass_hat_k[4] == pytest.approx(0.2)  # only c4 passes all four
    assert report.pass_at_k[4] == pytest.approx(0.8)  # all but c0 pass once
    assert report.scores.pass_hat_k[4].value == report.pass_hat_k[4]
    assert report.scores.pass_at_k[4].value == report.pass_at_k[4]
    assert report.scores.tasks == {1: 5, 2: 5, 4: 5}
    data = json.loads(json.dumps(report.to_dict()))
    assert data["tasks"]["c2"]["pass_hat_k"] == {"1": 0.5, "2": 1 / 6, "4": 0.0}
    assert data["pass_hat_k"]["4"] == pytest.approx(0.2)
    assert data["scores"]["pass_hat_k"]["4"]["value"] == pytest.approx(0.2)
    assert set(data["scores"]["pass_at_k"]["1"]) == {"value", "low", "high"}
    assert data["interval"]["method"] == "expanded percentile bootstrap over tasks"
    assert data["interval"]["confidence"] == 0.95


def test_every_mean_has_an_interval_around_it_per_model_too() -> None:
    rng = random.Random(7)
    passes = {
        f"t{i}@{m}": [rng.random() < q for _ in range(5)]
        for i in range(30)
        for m, q in (("small", 0.3), ("large", 0.8))
    }
    report = hand_made_report("b", passes, k_values=(1, 2, 5))
    assert set(report.scores_by_model) == {"small", "large"}
    for scores in (report.scores, *report.scores_by_model.values()):
        for estimates in (scores.pass_at_k, scores.pass_hat_k):
            assert set(estimates) == {1, 2, 5}
            for e in estimates.values():
                assert 0.0 <= e.low <= e.value <= e.high <= 1.0
                assert e.high - e.low < 0.5
                # Zero width only when every task scores the same (all pass, or none).
                assert e.high > e.low or e.value in (0.0, 1.0)
    small, large = report.scores_by_model["small"], report.scores_by_model["large"]
    assert report.by_model["small"][1] == small.pass_at_k[1].value
    assert report.by_model_pass_hat_k["large"][5] == large.pass_hat_k[5].value
    assert report.scores is report.scores  # one bootstrap, on first use
    assert small.tasks[1] == large.tasks[1] == 30 and report.scores.tasks[1] == 60
    # The models are far apart: their pass@1 intervals do not overlap.
    assert small.pass_at_k[1].high < large.pass_at_k[1].low
    # Same data, same intervals; and the tasks' order does not matter.
    again = hand_made_report("b", dict(reversed(list(passes.items()))), k_values=(1, 2, 5))
    assert again.scores == report.scores
    assert again.scores_by_model == report.scores_by_model


def test_an_interrupted_run_counts_per_k_the_tasks_with_k_trials() -> None:
    report = hand_made_report(
        "b",
        {"full": outcomes(4, 2), "half": outcomes(2, 2), "none": [], "full2": outcomes(4, 4)},
        trials_per_task=4,
        k_values=(1, 2, 4),
    )
    assert report.scores.tasks == {1: 3, 2: 3, 4: 2}
    assert report.pass_at_k[4] == pytest.approx((1.0 + 1.0) / 2)
    assert report.pass_hat_k[4] == pytest.approx((0.0 + 1.0) / 2)
    assert report.pass_hat_k[2] == pytest.approx((1 / 6 + 1.0 + 1.0) / 3)


@given(st.lists(counts(), min_size=1, max_size=40))
def test_an_interval_holds_its_mean_and_stays_within_the_tasks_values(
    tasks: list[tuple[int, int, int]],
) -> None:
    outcomes = [(n, c) for n, c, _ in tasks]
    scores = task_scores(outcomes, [1, 2], resamples=100)
    e = scores.pass_at_k[1]
    values = [c / n for n, c in outcomes]
    assert min(values) <= e.low <= e.value <= e.high <= max(values)
    assert e.value == pytest.approx(sum(values) / len(values))
    assert scores.tasks[1] == len(tasks)
    if 2 in scores.tasks:
        hat = [pass_hat_k(n, c, 2) for n, c in outcomes if n >= 2]
        assert scores.tasks[2] == len(hat)
        assert scores.pass_hat_k[2].value == pytest.approx(sum(hat) / len(hat))
    assert task_scores(list(reversed(outcomes)), [1, 2], resamples=100) == scores


def test_an_interval_is_a_point_when_every_task_scores_the_same() -> None:
    scores = task_scores([(3, 3)] * 50, [1, 3])
    assert scores.pass_at_k[3] == Estimate(1.0, 1.0, 1.0)
    assert scores.pass_hat_k[1] == Estimate(1.0, 1.0, 1.0)
    assert task_scores([(1, 0)], [1]).pass_at_k[1] == Estimate(0.0, 0.0, 0.0)
    assert task_scores([], [1]).pass_at_k == {}


@pytest.mark.parametrize(("n", "p"), [(30, 0.2), (5, 0.9), (400, 0.35), (10_000, 0.5)])
def test_binomial_draws_follow_the_binomial_distribution(n: int, p: float) -> None:
    rng = random.Random(1)
    draws = [binomial(rng, n, p) for _ in range(20_000)]
    assert all(0 <= x <= n for x in draws)
    mean = sum(draws) / len(draws)
    var = sum((x - mean) ** 2 for x in draws) / (len(draws) - 1)
    sd = (n * p * (1 - p)) ** 0.5
    assert mean == pytest.approx(n * p, abs=5 * sd / len(draws) ** 0.5)
    assert var == pytest.approx(sd * sd, rel=0.05)
    if n <= 400:  # chi-square against the exact pmf over the bulk of the outcomes
        seen = Counter(draws)
        pmf = {x: comb(n, x) * p**x * (1 - p) ** (n - x) for x in range(n + 1)}
        bins = [x for x in range(n + 1) if pmf[x] * len(draws) >= 20]
        chi2 = sum((seen[x] - pmf[x] * len(draws)) ** 2 / (pmf[x] * len(draws)) for x in bins)
        assert chi2 < len(bins) + 5 * (2 * len(bins)) ** 0.5  # about 5 standard deviations


def test_multinomial_draws_add_up_and_follow_the_weights() -> None:
    rng = random.Random(2)
    weights = [5, 0, 1, 14]
    totals = [0] * 4
    for _ in range(2000):
        drawn = multinomial(rng, 100, weights)
        assert sum(drawn) == 100 and drawn[1] == 0
        totals = [a + b for a, b in zip(totals, drawn, strict=True)]
    assert [t / 2000 for t in totals] == pytest.approx([25, 0, 5, 70], abs=0.5)


def test_the_grouped_bootstrap_matches_resampling_task_by_task() -> None:
    values = [0.0] * 30 + [0.5] * 12 + [1.0] * 18
    fast = bootstrap_means([30, 12, 18], [[0.0, 0.5, 1.0]], resamples=4000, seed=3)[0]
    rng = random.Random(4)
    slow = sorted(sum(rng.choices(values, k=len(values))) / len(values) for _ in range(4000))
    for q in (0.025, 0.25, 0.5, 0.75, 0.975):
        i = round(q * 3999)
        assert fast[i] == pytest.approx(slow[i], abs=0.012)
    mean = sum(values) / len(values)
    low, high = percentile_interval(fast, mean, len(values))
    # About the t interval mean +- t[59] s / sqrt(60).
    s = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    assert low == pytest.approx(mean - 2.001 * s / len(values) ** 0.5, abs=0.015)
    assert high == pytest.approx(mean + 2.001 * s / len(values) ** 0.5, abs=0.015)


def test_few_members_are_resampled_as_choices_draws_them_one_by_one() -> None:
    """The direct path (few members per kind) gives, to the bit, the distributions of
    drawing ``rng.choices(members, k=total)`` per resample: intervals do not change
    with how the draws are counted."""

    def one_by_one(counts: list[int], columns: list[list[float]], seed: int) -> list[Any]:
        rng, total = random.Random(seed), sum(counts)
        members = [j for j, count in enumerate(counts) for _ in range(count)]
        out: list[list[float]] = [[] for _ in columns]
        for _ in range(50):
            drawn = Counter(rng.choices(members, k=total))
            for q, values in enumerate(columns):
                out[q].append(sum(drawn[j] * v for j, v in enumerate(values)) / total)
        spans = [[v for v, c in zip(col, counts, strict=True) if c] for col in columns]
        return [
            sorted(min(max(x, min(span)), max(span)) for x in dist)
            for dist, span in zip(out, spans, strict=True)
        ]

    rng = random.Random(5)
    for seed in range(300):
        counts = [rng.choice([0, 1, 2, 3, 20]) for _ in range(rng.randint(1, 8))]
        counts[0] = counts[0] or 1
        columns = [
            [rng.choice([0.0, 1.0, 0.2, 1 / 3, -0.5, rng.random()]) for _ in counts]
            for _ in range(rng.randint(1, 3))
        ]
        expected = one_by_one(counts, columns, seed)
        assert bootstrap_means(counts, columns, resamples=50, seed=seed) == expected


@pytest.mark.parametrize("members", [60, 6_000, 600_000])
def test_the_bootstrap_spread_is_the_standard_error_at_any_size(members: int) -> None:
    # Few members are drawn one by one, many through binomials: both must give the
    # bootstrap distribution of the mean, centred on it with spread sd / sqrt(n).
    counts = [members // 2, members // 5, members * 3 // 10]
    column = [0.0, 0.5, 1.0]
    mean = sum(c * v for c, v in zip(counts, column, strict=True)) / members
    sd = (sum(c * (v - mean) ** 2 for c, v in zip(counts, column, strict=True)) / members) ** 0.5
    se = sd / members**0.5
    dist = bootstrap_means(counts, [column], resamples=4000, seed=members)[0]
    centre = sum(dist) / len(dist)
    spread = (sum((x - centre) ** 2 for x in dist) / (len(dist) - 1)) ** 0.5
    assert centre == pytest.approx(mean, abs=0.1 * se)
    assert spread == pytest.approx(se, rel=0.05)
    assert dist[round(0.025 * 3999)] == pytest.approx(mean - 1.96 * se, abs=0.15 * se)
    assert dist[round(0.975 * 3999)] == pytest.approx(mean + 1.96 * se, abs=0.15 * se)


@pytest.mark.parametrize(
    ("df", "t"), [(1, 12.706), (2, 4.303), (3, 3.182), (9, 2.262), (30, 2.042), (10**6, 1.960)]
)
def test_t_quantiles(df: int, t: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(t, rel=1.5e-3)


def test_an_interval_over_few_tasks_is_wider_than_the_plain_percentile_one() -> None:
    dist = [i / 1999 for i in range(2000)]  # a uniform bootstrap distribution on [0, 1]
    assert percentile_interval(dist, 0.5, 10**6) == pytest.approx((0.025, 0.975), abs=1e-3)
    low, high = percentile_interval(dist, 0.5, 10)
    assert low < 0.015 and high > 0.985
    assert percentile_interval(dist, 0.3, 1) == (0.3, 0.3)


def _simulated_benchmarks(simulations: int) -> list[list[tuple[int, int]]]:
    """Benchmarks of 40 tasks x 5 trials whose tasks' pass rates p are uniform on [0, 1]:
    the true mean pass@k is then E[1 - (1 - p)^k] = k / (k + 1), and pass^k is
    E[p^k] = 1 / (k + 1)."""
    rng = random.Random(11)
    out = []
    for _ in range(simulations):
        tasks = []
        for _ in range(40):
            p = rng.random()
            tasks.append((5, sum(rng.random() < p for _ in range(5))))
        out.append(tasks)
    return out


KS = (1, 2, 5)


def _truth(name: str, k: int) -> float:
    return k / (k + 1) if name == "pass@" else 1 / (k + 1)


@pytest.mark.slow
def test_95_percent_intervals_cover_the_truth_about_95_percent_of_the_time() -> None:
    hits: Counter[str] = Counter()
    benchmarks = _simulated_benchmarks(200)
    for sim, tasks in enumerate(benchmarks):
        scores = task_scores(tasks, KS, resamples=500, seed=sim)
        for k in KS:
            for name, e in (("pass@", scores.pass_at_k[k]), ("pass^", scores.pass_hat_k[k])):
                hits[f"{name}{k}"] += e.low <= _truth(name, k) <= e.high
    assert len(hits) == 6
    assert hits["pass@1"] == hits["pass^1"]  # the same numbers
    for name, count in hits.items():
        assert 0.90 <= count / len(benchmarks) <= 0.99, (name, count)


def test_the_coverage_check_tells_a_too_narrow_interval_apart() -> None:
    # The same simulation with 50% intervals covers about half the time: the check above
    # would catch intervals that are too narrow (too confident).
    hits: Counter[str] = Counter()
    benchmarks = _simulated_benchmarks(100)
    for sim, tasks in enumerate(benchmarks):
        groups = Counter(tasks)
        kinds = sorted(groups)
        columns = [[f(n, c, k) for n, c in kinds] for k in KS for f in (pass_at_k, pass_hat_k)]
        dists = bootstrap_means([groups[t] for t in kinds], columns, resamples=500, seed=sim)
        for i, (k, name) in enumerate((k, name) for k in KS for name in ("pass@", "pass^")):
            value = sum(groups[t] * v for t, v in zip(kinds, columns[i], strict=True))
            low, high = percentile_interval(dists[i], value / len(tasks), len(tasks), 0.5)
            hits[f"{name}{k}"] += low <= _truth(name, k) <= high
    for name, count in hits.items():
        assert 0.35 <= count / len(benchmarks) <= 0.65, (name, count)
