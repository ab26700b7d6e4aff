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
from ._tasks import TaskColumns, TaskReport, task_rows


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
        """True when the difference's interval excludes 0, over at least two shared
        tasks: the interval over one task is that task's difference, no evidence of
        how another draw of tasks would go."""
        if len(self.shared) < 2:
            return False
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
    # Each estimate bootstraps over its own distinct values: fewer kinds than the
    # (a, b) pairs, and the same distribution (a mean's resamples need nothing else).
    values: tuple[Counter[tuple[float, ...]], ...] = (Counter(), Counter(), Counter())
    shared: list[str] = []
    improved: list[str] = []
    regressed: list[str] = []
    tied: list[str] = []
    incomplete: list[str] = []
    if measure is not None:
        keys_a, keys_b, outcomes_a, outcomes_b = _outcomes(report_a, report_b, model_a, model_b)
        sides = (shared, improved, regressed, tied, incomplete)
        for (va, vb), how_many in _by_outcome(outcomes_a, outcomes_b, measure, k, sides):
            for counter, value in zip(values, (va, vb, vb - va), strict=True):
                counter[(value,)] += how_many
    else:
        tasks_a, tasks_b = _paired(report_a, report_b, model_a, model_b)
        keys_a, keys_b = tasks_a.keys(), tasks_b.keys()
        for key, task_a in tasks_a.items():
            task_b = tasks_b.get(key)
            if task_b is None:
                continue
            pair = _named_values(task_a, task_b, score or "")
            if pair is None:
                incomplete.append(key)
                continue
            va, vb = pair
            for counter, value in zip(values, (va, vb, vb - va), strict=True):
                counter[(value,)] += 1
            shared.append(key)
            (improved if vb > va else regressed if vb < va else tied).append(key)
    if not shared:
        if score is None:
            having = f" with at least {k} finished trial{'' if k == 1 else 's'}"
            short = "have fewer"
        elif not incomplete:  # no task id in common: their scores are not the reason
            having, short = "", ""
        else:
            having = f" with the score {score!r} on both sides" + _known_scores(report_a, report_b)
            short = "lack it on a side"
        raise ConfigError(
            f"{_side(report_a, model_a)} and {_side(report_b, model_b)} share no task"
            + having
            + (f" ({len(incomplete)} shared tasks {short})" if incomplete else "")
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
        only_a=tuple(key for key in keys_a if key not in keys_b),
        only_b=tuple(key for key in keys_b if key not in keys_a),
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


def _paired(
    report_a: BenchmarkReport, report_b: BenchmarkReport, model_a: str | None, model_b: str | None
) -> tuple[dict[str, _Task], dict[str, _Task]]:
    """Each side's tasks by the key that pairs them."""
    tasks_a = _keyed(report_a, model_a)
    tasks_b = _keyed(report_b, model_b)
    if model_a is None and model_b is None and tasks_a.keys().isdisjoint(tasks_b):
        # A one-model run names a task ``t`` (its model in its metadata), a several-models
        # run ``t@model``: pair them by the task's own id and model.
        tasks_a, tasks_b = _with_model(report_a), _with_model(report_b)
    return tasks_a, tasks_b


_Outcomes = Mapping[str, tuple[int, int]]


def _outcomes(
    report_a: BenchmarkReport, report_b: BenchmarkReport, model_a: str | None, model_b: str | None
) -> tuple[Any, Any, _Outcomes, _Outcomes]:
    """Each side's keys and (finished, passed) by key: read from a report of trial
    heads' columns without a tuple per task where no model is chosen."""
    tasks_a, tasks_b = report_a.tasks, report_b.tasks
    if (
        model_a is None
        and model_b is None
        and isinstance(tasks_a, TaskColumns)
        and isinstance(tasks_b, TaskColumns)
    ):
        a, b = tasks_a.outcomes(), tasks_b.outcomes()
        if not a.keys().isdisjoint(b):
            return a.keys(), b.keys(), a, b
    keyed_a, keyed_b = _paired(report_a, report_b, model_a, model_b)
    return (
        keyed_a.keys(),
        keyed_b.keys(),
        {key: (task[1], task[2]) for key, task in keyed_a.items()},
        {key: (task[1], task[2]) for key, task in keyed_b.items()},
    )


def _by_outcome(
    outcomes_a: _Outcomes,
    outcomes_b: _Outcomes,
    measure: Metric,
    k: int,
    sides: tuple[list[str], ...],
) -> list[tuple[tuple[float, float], int]]:
    """The tasks both sides have, in a's order, added to ``sides`` (shared, improved,
    regressed, tied, incomplete); returned: each distinct pair of outcomes whose tasks
    are compared, as its values and how many tasks have it, in the order first met
    (a huge comparison has few such pairs: each is valued once, and the bootstrap's
    counters fill in the order a task at a time would fill them)."""
    shared, improved, regressed, tied, incomplete = sides
    known: dict[tuple[int, int], float] = {}
    # Where the tasks of each pair of outcomes go (None: left out, incomplete).
    goes: dict[tuple[tuple[int, int], tuple[int, int]], list[str] | None] = {}
    counted: Counter[tuple[tuple[int, int], tuple[int, int]]] = Counter()
    found = outcomes_b.get
    for key, a in outcomes_a.items():
        b = found(key)
        if b is None:
            continue
        pair = (a, b)
        if pair in goes:
            side = goes[pair]
        else:
            side = goes[pair] = _side_of(a, b, measure, k, known, improved, regressed, tied)
        if side is None:
            incomplete.append(key)
            continue
        side.append(key)
        shared.append(key)
        counted[pair] += 1
    return [((known[a], known[b]), n) for (a, b), n in counted.items()]


def _side_of(
    a: tuple[int, int],
    b: tuple[int, int],
    measure: Metric,
    k: int,
    known: dict[tuple[int, int], float],
    *sides: list[str],
) -> list[str] | None:
    """Where a task of outcomes ``a`` and ``b`` goes (improved, regressed, tied), or None
    when a side has fewer than k finished trials; ``known``: the metric's values by
    outcome so far."""
    if a[0] < k or b[0] < k:
        return None
    for outcome in (a, b):
        if outcome not in known:
            known[outcome] = measure.estimator(*outcome, k)
    va, vb = known[a], known[b]
    improved, regressed, tied = sides
    return improved if vb > va else regressed if vb < va else tied


def _named_values(task_a: _Task, task_b: _Task, score: str) -> tuple[float, float] | None:
    """The named score ``score`` of each side's task, or None when a side has none (no
    trial with it)."""
    va = _named_of(task_a).get(score)
    vb = _named_of(task_b).get(score)
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
