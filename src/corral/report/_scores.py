"""Means over tasks of pass@k and pass^k, each with its 95% bootstrap interval."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
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
from ._passk import pass_at_k, pass_hat_k

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
    """pass@k and pass^k averaged over a set of tasks, each with its 95% interval.

    For each k, the mean is over the tasks with at least k finished trials (every task
    of a finished run); ``tasks`` counts them per k. The interval is an expanded
    percentile bootstrap over those tasks (`RESAMPLES` resamples, seed `SEED`): it
    measures how much the mean would move on another draw of tasks, trial noise
    included.
    """

    tasks: dict[int, int]
    pass_at_k: dict[int, Estimate]
    pass_hat_k: dict[int, Estimate]

    def to_dict(self) -> dict[str, Any]:
        return {
            "tasks": {str(k): n for k, n in self.tasks.items()},
            "pass_at_k": {str(k): e.to_dict() for k, e in self.pass_at_k.items()},
            "pass_hat_k": {str(k): e.to_dict() for k, e in self.pass_hat_k.items()},
        }


def task_scores(
    outcomes: Iterable[tuple[int, int]],
    k_values: Sequence[int],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Scores:
    """`Scores` of tasks given as (finished trials, passed trials), one pair per task.

    A k no task has k trials for is left out. Cost: one bootstrap per distinct set of
    counted tasks (one in a finished run), each about 0.04 s whatever the number of tasks.
    """
    tasks: dict[int, int] = {}
    at: dict[int, Estimate] = {}
    hat: dict[int, Estimate] = {}
    for ks, weights, columns in _groups(outcomes, k_values):
        total = sum(weights)
        dists = bootstrap_means(weights, columns, resamples=resamples, seed=seed)
        for i, k in enumerate(ks):
            tasks[k] = total
            for q, out in ((2 * i, at), (2 * i + 1, hat)):
                mean = weighted_mean(weights, columns[q])
                out[k] = Estimate(mean, *percentile_interval(dists[q], mean, total))
    order = [k for k in k_values if k in tasks]
    return Scores(
        tasks={k: tasks[k] for k in order},
        pass_at_k={k: at[k] for k in order},
        pass_hat_k={k: hat[k] for k in order},
    )


def task_means(
    outcomes: Iterable[tuple[int, int]], k_values: Sequence[int]
) -> tuple[dict[int, float], dict[int, float]]:
    """Mean pass@k and mean pass^k of tasks given as in `task_scores`, without
    intervals: the ``value`` of each of its estimates, at no bootstrap's cost."""
    at: dict[int, float] = {}
    hat: dict[int, float] = {}
    for ks, weights, columns in _groups(outcomes, k_values):
        for i, k in enumerate(ks):
            at[k] = weighted_mean(weights, columns[2 * i])
            hat[k] = weighted_mean(weights, columns[2 * i + 1])
    order = [k for k in k_values if k in at]
    return {k: at[k] for k in order}, {k: hat[k] for k in order}


def _groups(
    outcomes: Iterable[tuple[int, int]], k_values: Sequence[int]
) -> Iterator[tuple[list[int], list[int], list[list[float]]]]:
    """(ks, weights, columns) for each set of counted tasks: the ks that count the same
    tasks share one bootstrap (one draw serves every quantity). Columns 2i and 2i + 1
    are pass@k and pass^k of ks[i] for each kind of task, weights how many of each."""
    counts = Counter(outcomes)
    by_population: dict[tuple[tuple[int, int], ...], list[int]] = {}
    for k in k_values:
        population = tuple(sorted(o for o in counts if o[0] >= k))
        if population:
            by_population.setdefault(population, []).append(k)
    for population, ks in by_population.items():
        # (n, c) ends each key so that kinds with equal values stay apart.
        values = {
            tuple(f(n, c, k) for k in ks for f in (pass_at_k, pass_hat_k)) + (n, c): counts[(n, c)]
            for n, c in population
        }
        weights, columns = grouped(values)
        yield ks, weights, columns[: 2 * len(ks)]
