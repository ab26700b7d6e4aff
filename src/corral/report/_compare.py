"""Paired comparison of two reports (or two models of one) on the tasks they share."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import ConfigError
from .._suggest import did_you_mean
from ._bootstrap import RESAMPLES, SEED
from ._metrics import METRICS, PASS_AT_K, PASS_HAT_K, Metric, metric_named
from ._model import BenchmarkReport
from ._named import SCORE_PREFIX, score_name
from ._scores import Estimate, interval_info, mean_interval
from ._tasks import TaskReport, task_rows


@dataclass(frozen=True, slots=True)
class Comparison:
    """Side b against side a on the tasks both ran: a is the baseline, b the candidate.

    ``difference`` is b's mean of ``measure`` (pass@k unless told) minus a's over the
    ``shared`` tasks (positive: b does better), with a 95% paired-bootstrap interval
    (tasks resampled together on both sides, so differences between tasks cancel
    out). ``a`` and ``b`` are each side's mean over those same tasks. A task is
    ``improved`` when b's value on it is higher than a's, ``regressed`` when lower,
    else ``tied``. Tasks are named as in a (without the ``@model`` suffix when a
    model is chosen).
    """

    benchmark_a: str
    benchmark_b: str
    #: The model each side is restricted to, or None for every task.
    model_a: str | None
    model_b: str | None
    k: int
    #: Tasks both sides have, each with at least k finished trials on both, in a's order.
    shared: tuple[str, ...]
    a: Estimate
    b: Estimate
    difference: Estimate
    improved: tuple[str, ...]
    regressed: tuple[str, ...]
    tied: tuple[str, ...]
    #: Tasks only one side has.
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()
    #: Tasks both have but left out: fewer than k finished trials on a side.
    incomplete: tuple[str, ...] = ()
    #: True when the compared metric is pass^k (all k trials pass), not pass@k.
    hat: bool = False
    #: The bootstrap behind the intervals.
    resamples: int = RESAMPLES
    seed: int = SEED
    #: The compared metric (pass^k when ``hat``, if not given).
    measure: Metric | None = None
    #: The compared named score (``Evaluation.scores``), if one is compared: then
    #: ``incomplete`` lists the shared tasks that lack it on a side, and k is unused.
    score: str | None = None

    @property
    def metric(self) -> str:
        """``"pass@1"``, ``"pass^4"``, ``"score:accuracy"``...: what is compared."""
        if self.score is not None:
            return SCORE_PREFIX + self.score
        measure = self.measure or (PASS_HAT_K if self.hat else PASS_AT_K)
        return measure.label(self.k)

    @property
    def significant(self) -> bool:
        """True when the difference's interval excludes 0."""
        return self.difference.low > 0.0 or self.difference.high < 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark_a": self.benchmark_a,
            "benchmark_b": self.benchmark_b,
            "model_a": self.model_a,
            "model_b": self.model_b,
            "k": self.k,
            "metric": self.metric,
            "shared": len(self.shared),
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "difference": self.difference.to_dict(),
            "significant": self.significant,
            "improved": list(self.improved),
            "regressed": list(self.regressed),
            "tied": list(self.tied),
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
            "incomplete": list(self.incomplete),
            "interval": interval_info(self.resamples, self.seed),
        }


def compare(
    report_a: BenchmarkReport,
    report_b: BenchmarkReport,
    *,
    k: int = 1,
    metric: str = "pass@k",
    model: str | None = None,
    models: tuple[str, str] | None = None,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    metrics: Sequence[Metric] = METRICS,
) -> Comparison:
    """Compare pass@k (``metric="pass^k"``: pass^k; any metric of ``metrics`` by its
    name; ``metric="score:NAME"``: the named score NAME, each task's mean over its
    trials that have it) of ``report_b`` against ``report_a`` on the tasks they share.

    ``model`` restricts both sides to that model's tasks; ``models=(m_a, m_b)``
    compares model m_a's tasks in a with model m_b's in b, so
    ``compare(report, report, models=("small", "large"))`` compares two models of
    one several-models run task by task. The metric is computed from each task's
    trials, for any k up to both reports' trials per task. A `ConfigError` names a
    bad k or metric, an unknown model, or reports that share no task.
    """
    if model is not None and models is not None:
        raise ConfigError("give model or models, not both")
    model_a: str | None
    model_b: str | None
    if models is not None:
        if len(models) != 2:
            raise ConfigError(f"models must be two model names (a's, b's), not {models!r}")
        model_a, model_b = models
    else:
        model_a = model_b = model
    for report in (report_a, report_b):
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= report.trials_per_task:
            raise ConfigError(
                f"k = {k!r} is outside 1..{report.trials_per_task} "
                f"(trials_per_task of {report.benchmark_id!r})"
            )
    score = score_name(metric)
    measure = metric_named(metric, metrics) if score is None else None
    if score == "":
        raise ConfigError(f"metric {metric!r} names no score: give score:NAME")
    tasks_a = _keyed(report_a, model_a)
    tasks_b = _keyed(report_b, model_b)
    if model_a is None and model_b is None and tasks_a.keys().isdisjoint(tasks_b):
        # A one-model run names a task ``t`` (its model in its metadata), a several-models
        # run ``t@model``: pair them by the task's own id and model.
        tasks_a, tasks_b = _with_model(report_a), _with_model(report_b)
    # Each estimate bootstraps over its own distinct values: fewer kinds than the
    # (a, b) pairs, and the same distribution (a mean's resamples need nothing else).
    values: tuple[Counter[tuple[float, ...]], ...] = (Counter(), Counter(), Counter())
    shared: list[str] = []
    improved: list[str] = []
    regressed: list[str] = []
    tied: list[str] = []
    incomplete: list[str] = []
    # The metric per (finished, passed): a huge comparison has few distinct outcomes.
    known: dict[tuple[int, int], float] = {}
    for key, task_a in tasks_a.items():
        task_b = tasks_b.get(key)
        if task_b is None:
            continue
        pair = _values(task_a, task_b, measure, score, k, known)
        if pair is None:
            incomplete.append(key)
            continue
        va, vb = pair
        for counter, value in zip(values, (va, vb, vb - va), strict=True):
            counter[(value,)] += 1
        shared.append(key)
        (improved if vb > va else regressed if vb < va else tied).append(key)
    if not shared:
        having = (
            f"with at least {k} finished trial{'' if k == 1 else 's'}"
            if score is None
            else f"with the score {score!r} on both sides" + _known_scores(report_a, report_b)
        )
        raise ConfigError(
            f"{_side(report_a, model_a)} and {_side(report_b, model_b)} share no task "
            + having
            + (f" ({len(incomplete)} shared tasks have fewer)" if incomplete else "")
            + _models_hint(report_a, report_b)
        )
    estimates = [mean_interval(counter, resamples=resamples, seed=seed) for counter in values]
    return Comparison(
        benchmark_a=report_a.benchmark_id,
        benchmark_b=report_b.benchmark_id,
        model_a=model_a,
        model_b=model_b,
        k=k,
        shared=tuple(shared),
        a=estimates[0],
        b=estimates[1],
        difference=estimates[2],
        improved=tuple(improved),
        regressed=tuple(regressed),
        tied=tuple(tied),
        only_a=tuple(key for key in tasks_a if key not in tasks_b),
        only_b=tuple(key for key in tasks_b if key not in tasks_a),
        incomplete=tuple(incomplete),
        hat=measure == PASS_HAT_K,
        resamples=resamples,
        seed=seed,
        measure=measure,
        score=score,
    )


#: What a comparison reads of a task: model, finished, passed, and its named scores
#: or its report (whose named scores are read when compared). Plain tuples: a
#: comparison of 100,000 tasks makes 200,000 of them.
_Task = tuple[str | None, int, int, "Mapping[str, float] | TaskReport"]


def _named_of(task: _Task) -> Mapping[str, float]:
    named = task[3]
    return named.named_scores if isinstance(named, TaskReport) else named


def _tasks(report: BenchmarkReport) -> Iterator[tuple[str, _Task]]:
    for task_id, model, n, c, named in task_rows(report.tasks):
        yield task_id, (model, n, c, named)


def _values(
    task_a: _Task,
    task_b: _Task,
    measure: Metric | None,
    score: str | None,
    k: int,
    known: dict[tuple[int, int], float],
) -> tuple[float, float] | None:
    """The compared value of each side's task, or None when a side has none (fewer
    than k finished trials; no trial with the named score). ``known``: the metric's
    values by (finished, passed) so far."""
    if measure is not None:
        a, b = task_a[1:3], task_b[1:3]
        if a[0] < k or b[0] < k:
            return None
        value_a, value_b = known.get(a), known.get(b)
        if value_a is None:
            value_a = known[a] = measure.estimator(*a, k)
        if value_b is None:
            value_b = known[b] = measure.estimator(*b, k)
        return value_a, value_b
    va = _named_of(task_a).get(score or "")
    vb = _named_of(task_b).get(score or "")
    return None if va is None or vb is None else (va, vb)


def _known_scores(report_a: BenchmarkReport, report_b: BenchmarkReport) -> str:
    # From the tasks, not ``report.named_scores``: no bootstrap to name them.
    known = sorted(
        {name for r in (report_a, report_b) for t in r.tasks.values() for name in t.named_scores}
    )
    return f" (their named scores: {', '.join(map(repr, known)) or 'none'})"


def _keyed(report: BenchmarkReport, model: str | None) -> dict[str, _Task]:
    """The report's tasks by comparison key: the task id, or with a model, that model's
    tasks by their id without its ``@model`` suffix (as a several-models run names them)."""
    if model is None:
        return dict(_tasks(report))
    suffix = f"@{model}"
    out = {
        (task_id.removesuffix(suffix)): task for task_id, task in _tasks(report) if task[0] == model
    }
    if not out:
        known = sorted({t.model for t in report.tasks.values() if t.model is not None})
        raise ConfigError(
            f"benchmark {report.benchmark_id!r} has no task on model {model!r} "
            f"(its models: {', '.join(map(repr, known)) or 'none'})" + did_you_mean(model, known)
        )
    return out


def _with_model(report: BenchmarkReport) -> dict[str, _Task]:
    """The report's tasks keyed ``task@model`` (as a several-models run names them)."""
    return {
        task_id
        if task[0] is None or task_id.endswith(f"@{task[0]}")
        # One model's run names its tasks plainly: key them as a several-models run would.
        else f"{task_id}@{task[0]}": task
        for task_id, task in _tasks(report)
    }


def _models_hint(report_a: BenchmarkReport, report_b: BenchmarkReport) -> str:
    """Why two reports share no task when one names its tasks ``task@model``."""
    for this, other in ((report_a, report_b), (report_b, report_a)):
        models = sorted({t.model for t in this.tasks.values() if t.model is not None})
        several = all(
            t.model is not None and i.endswith(f"@{t.model}") for i, t in this.tasks.items()
        )
        if several and any(t.model is None for t in other.tasks.values()):
            return (
                f"; {this.benchmark_id!r} names its tasks task@model (models "
                f"{', '.join(map(repr, models))}) and {other.benchmark_id!r} ran without a "
                f"model: compare it with a run on one of those models, or two models of "
                f"{this.benchmark_id!r} with --models"
            )
    return ""


def _side(report: BenchmarkReport, model: str | None) -> str:
    return f"{report.benchmark_id!r}" + (f" (model {model!r})" if model is not None else "")
