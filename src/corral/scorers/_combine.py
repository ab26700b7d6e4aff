"""`combine`: several scorers, one evaluation with a named score from each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._errors import ConfigError
from .._types import NO_USAGE, Evaluation, TrialRecord
from ._base import Scorer


class _Combined(Scorer):
    def __init__(self, scorers: tuple[Scorer, ...], primary: Scorer) -> None:
        super().__init__(primary.name)
        self.scorers = scorers
        self.primary = primary

    async def __call__(self, trial: TrialRecord) -> Evaluation:
        scores: dict[str, float] = {}
        details: dict[str, Any] = {}
        usage = NO_USAGE
        calls: list[Any] = []
        main: Evaluation | None = None
        for scorer in self.scorers:
            evaluation = await scorer(trial)
            if not isinstance(evaluation, Evaluation):
                raise TypeError(f"scorer {scorer!r} returned {evaluation!r}, not an Evaluation")
            scores.update(evaluation.scores)
            if evaluation.details:
                details[scorer.name] = dict(evaluation.details)
            usage = usage + evaluation.usage
            calls.extend(evaluation.model_calls)
            if scorer is self.primary:
                main = evaluation
        assert main is not None
        return Evaluation(main.score, main.passed, details, scores, usage, tuple(calls))


def combine(*scorers: Scorer | Callable[[TrialRecord], Any], passed: str | None = None) -> Scorer:
    """Several scorers as one ``evaluate``: each runs in turn, and each non-abstaining
    one's score is in ``scores`` under its name (``{"exact": 1.0, "f1": 0.62}``).
    The trial's own ``score`` and ``passed`` are those of the scorer named ``passed``
    (the first by default); ``details`` holds each scorer's details under its name,
    ``usage`` the sum of theirs and ``model_calls`` all of theirs. A plain function
    of the record is taken as `scorer` takes it."""
    if not scorers:
        raise ConfigError("combine needs at least one scorer")
    names: dict[str, Scorer] = {}
    taken = tuple(one if isinstance(one, Scorer) else as_scorer(one) for one in scorers)
    for scorer in taken:
        if scorer.name in names:
            raise ConfigError(
                f"two scorers are named {scorer.name!r}: give one another name= "
                "(each named score needs its own name)"
            )
        names[scorer.name] = scorer
    if passed is None:
        primary = taken[0]
    elif passed in names:
        primary = names[passed]
    else:
        raise ConfigError(f"passed={passed!r} names none of the scorers {sorted(names)}")
    return _Combined(taken, primary)


class _Function(Scorer):
    def __init__(self, name: str, function: Callable[[TrialRecord], Any]) -> None:
        super().__init__(name)
        self.function = function

    async def __call__(self, trial: TrialRecord) -> Evaluation:
        result = self.function(trial)
        if hasattr(result, "__await__"):
            result = await result
        if isinstance(result, Evaluation):
            if self.name in result.scores or not result.scores and "abstained" in result.details:
                return result
            return Evaluation(
                result.score,
                result.passed,
                result.details,
                {**result.scores, self.name: float(result.score)},
                result.usage,
                result.model_calls,
            )
        if result is None:
            return self.abstain(f"{self.name} returned None")
        if isinstance(result, bool):
            return self.verdict(float(result), result)
        if isinstance(result, int | float):
            return self.verdict(float(result), result >= 1)
        raise TypeError(
            f"scorer {self.name!r} returned {result!r}: an Evaluation, a bool, a number "
            "or None (abstain)"
        )


def as_scorer(function: object) -> Scorer:
    if not callable(function):
        raise ConfigError(f"combine takes scorers or functions of a TrialRecord, not {function!r}")
    return scorer(function)


def scorer(function: Callable[[TrialRecord], Any], *, name: str | None = None) -> Scorer:
    """A function of a `TrialRecord` (sync or async) as a scorer for `combine`: it
    returns an `Evaluation`, a bool (passed), a number (the score; passed at 1) or
    None (abstains). ``name`` defaults to the function's name."""
    if not callable(function):
        raise ConfigError(f"scorer takes a function, not {function!r}")
    return _Function(
        name if name is not None else getattr(function, "__name__", "scorer"), function
    )
