"""Means over tasks of each metric (pass@k, pass^k...), each with its 95% bootstrap interval."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._bootstrap import (
    CONFIDENCE,
    RESAMPLES,
    SEED,
    bootstrap_means,
    grouped,
    percentile_interval,
    weighted_mean,
)
from ._metrics import METRICS, PASS_AT_K, PASS_HAT_K, Metric

#: How every interval is made, as the JSON report states it.
INTERVAL_METHOD = "expanded percentile bootstrap over tasks"


def interval_info(resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, Any]:
    return {
        "method": INTERVAL_METHOD,
        "confidence": CONFIDENCE,
        "resamples": resamples,
        "seed": seed,
    }


@dataclass(frozen=True, slots=True)
class Estimate:
    """A mean over tasks (``value``) and its 95% confidence interval ``[low, high]``."""

    value: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"value": self.value, "low": self.low, "high": self.high}


@dataclass(frozen=True, slots=True)
class Scores:
    """Each metric (pass@k, pass^k...) averaged over a set of tasks, with its 95% interval.

    For each k, the mean is over the tasks with at least k finished trials (every task
    of a finished run); ``tasks`` counts them per k. The interval is an expanded
    percentile bootstrap over those tasks (`RESAMPLES` resamples, seed `SEED`): it
    measures how much the mean would move on another draw of tasks, trial noise
    included.
    """

    tasks: dict[int, int]
    #: By metric name, then k.
    estimates: dict[str, dict[int, Estimate]]
    metrics: tuple[Metric, ...] = field(default=METRICS, repr=False)
    #: Each named score (``Evaluation.scores``): its mean over the tasks that have it,
    #: with its 95% interval, by name (``scores["accuracy"]`` reads one).
    named: dict[str, Estimate] = field(default_factory=dict)
    #: How many tasks each named score's mean is over.
    named_tasks: dict[str, int] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Estimate:
        """A named score's estimate; a `KeyError` names the known ones."""
        try:
            return self.named[name]
        except KeyError:
            known = ", ".join(map(repr, self.named)) or "none"
            raise KeyError(f"no named score {name!r} (the report has: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self.named

    @property
    def pass_at_k(self) -> dict[int, Estimate]:
        return self.estimates.get(PASS_AT_K.name, {})

    @property
    def pass_hat_k(self) -> dict[int, Estimate]:
        return self.estimates.get(PASS_HAT_K.name, {})

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tasks": {str(k): n for k, n in self.tasks.items()}}
        for metric in self.metrics:
            values = self.estimates.get(metric.name, {})
            out[metric.key] = {str(k): e.to_dict() for k, e in values.items()}
        # Named scores beside the metrics, by name (one that a metric's key or "tasks"
        # takes is only in the report's ``named_scores``).
        for name, estimate in self.named.items():
            if name not in out:
                out[name] = estimate.to_dict() | {"tasks": self.named_tasks.get(name, 0)}
        return out


def mean_interval(
    values: Mapping[tuple[float, ...], int], *, resamples: int = RESAMPLES, seed: int = SEED
) -> Estimate:
    """The mean of ``{(value,): how many tasks have it}`` with its 95% bootstrap interval
    over those tasks (at least one)."""
    counts, columns = grouped(values)
    dist = bootstrap_means(counts, columns, resamples=resamples, seed=seed)[0]
    mean = weighted_mean(counts, columns[0])
    return Estimate(mean, *percentile_interval(dist, mean, sum(counts)))


def task_scores(
    outcomes: Iterable[tuple[int, int]],
    k_values: Sequence[int],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    metrics: Sequence[Metric] = METRICS,
) -> Scores:
    """`Scores` of tasks given as (finished trials, passed trials), one pair per task.

    A k no task has k trials for is left out. Cost: one bootstrap per distinct set of
    counted tasks (one in a finished run), each about 0.04 s whatever the number of tasks.
    """
    tasks: dict[int, int] = {}
    found: dict[str, dict[int, Estimate]] = {m.name: {} for m in metrics}
    for ks, weights, columns in _groups(outcomes, k_values, metrics):
        total = sum(weights)
        dists = bootstrap_means(weights, columns, resamples=resamples, seed=seed)
        for i, k in enumerate(ks):
            tasks[k] = total
            for j, metric in enumerate(metrics):
                q = i * len(metrics) + j
                mean = weighted_mean(weights, columns[q])
                found[metric.name][k] = Estimate(mean, *percentile_interval(dists[q], mean, total))
    order = [k for k in k_values if k in tasks]
    return Scores(
        tasks={k: tasks[k] for k in order},
        estimates={name: {k: by_k[k] for k in order} for name, by_k in found.items()},
        metrics=tuple(metrics),
    )


def task_means(
    outcomes: Iterable[tuple[int, int]],
    k_values: Sequence[int],
    metrics: Sequence[Metric] = METRICS,
) -> dict[str, dict[int, float]]:
    """Each metric's mean (by name, then k) of tasks given as in `task_scores`, without
    intervals: the ``value`` of each of its estimates, at no bootstrap's cost."""
    found: dict[str, dict[int, float]] = {m.name: {} for m in metrics}
    for ks, weights, columns in _groups(outcomes, k_values, metrics):
        for i, k in enumerate(ks):
            for j, metric in enumerate(metrics):
                found[metric.name][k] = weighted_mean(weights, columns[i * len(metrics) + j])
    return {name: {k: by_k[k] for k in k_values if k in by_k} for name, by_k in found.items()}


def _groups(
    outcomes: Iterable[tuple[int, int]], k_values: Sequence[int], metrics: Sequence[Metric]
) -> Iterator[tuple[list[int], list[int], list[list[float]]]]:
    """(ks, weights, columns) for each set of counted tasks: the ks that count the same
    tasks share one bootstrap (one draw serves every quantity). Column i * m + j is
    metric j of ks[i] (m metrics) for each kind of task, weights how many of each."""
    counts = Counter(outcomes)
    by_population: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for k in k_values:
        population = tuple(sorted(o for o in counts if o[0] >= k))
        if population:
            by_population.setdefault(population, []).append(k)
    estimators = [m.estimator for m in metrics]
    for population, ks in by_population.items():
        # (n, c) ends each key so that kinds with equal values stay apart.
        values = {
            tuple(f(n, c, k) for k in ks for f in estimators) + (n, c): counts[(n, c)]
            for n, c in population
        }
        weights, columns = grouped(values)
        yield ks, weights, columns[: len(metrics) * len(ks)]
