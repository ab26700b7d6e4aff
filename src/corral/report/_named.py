"""Named scores (``Evaluation.scores``): each name's mean over tasks with its 95% interval.

A trial's score for a name is its evaluation's ``scores[name]``; a task's is the mean
over its finished trials that have it (a scorer that abstained is left out, not
counted 0); the mean over tasks is over the tasks that have it, and its interval the
same expanded percentile bootstrap over those tasks as pass@k's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._types import TrialRecord
from ._bootstrap import RESAMPLES, SEED, plain_mean
from ._scores import Estimate, mean_interval

#: How `compare` and ``corral compare --metric`` name a named score: ``score:accuracy``.
SCORE_PREFIX = "score:"


@dataclass(frozen=True, slots=True)
class NamedScore:
    """One named score's mean over the ``tasks`` that have it, with its 95% interval."""

    estimate: Estimate
    tasks: int

    def to_dict(self) -> dict[str, Any]:
        return self.estimate.to_dict() | {"tasks": self.tasks}


def task_named_scores(trials: Iterable[TrialRecord]) -> dict[str, float]:
    """Each named score of a task: the mean over its trials that have it, by name in
    the order first met (empty when its scorer gives none)."""
    found: dict[str, list[float]] = {}
    for trial in trials:
        evaluation = trial.evaluation
        if evaluation is None or not evaluation.scores:
            continue
        for name, value in evaluation.scores.items():
            found.setdefault(name, []).append(float(value))
    return {name: plain_mean(values) for name, values in found.items()}


def named_scores(
    tasks: Iterable[Sequence[TrialRecord]], *, resamples: int = RESAMPLES, seed: int = SEED
) -> dict[str, NamedScore]:
    """`NamedScore` of every name found in the trials of ``tasks`` (one sequence of
    trials per task), by name in the order first met."""
    return named_scores_of(
        (task_named_scores(trials) for trials in tasks), resamples=resamples, seed=seed
    )


def named_scores_of(
    tasks: Iterable[Mapping[str, float]], *, resamples: int = RESAMPLES, seed: int = SEED
) -> dict[str, NamedScore]:
    """`named_scores` from each task's named scores (`task_named_scores`)."""
    values: dict[str, Counter[tuple[float, ...]]] = {}
    for of_task in tasks:
        for name, value in of_task.items():
            values.setdefault(name, Counter())[(value,)] += 1
    return {
        name: NamedScore(mean_interval(counter, resamples=resamples, seed=seed), counter.total())
        for name, counter in values.items()
    }


def score_name(metric: str) -> str | None:
    """``accuracy`` for ``score:accuracy``; None for a metric that is not a named score."""
    if metric.startswith(SCORE_PREFIX):
        return metric.removeprefix(SCORE_PREFIX)
    return None
