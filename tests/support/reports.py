"""Reports made by hand: each task's trials passing or failing as a test says."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from corral import BenchmarkReport, Evaluation, TaskReport, TrialRecord, TrialStatus, Usage
from corral.report import build_report


def hand_made_report(
    benchmark_id: str,
    passes: Mapping[str, Sequence[bool]],
    *,
    trials_per_task: int | None = None,
    k_values: Sequence[int] = (1,),
    models: Mapping[str, str] | None = None,
) -> BenchmarkReport:
    """A report whose task ``t`` has one finished trial per item of ``passes[t]``,
    passing where it is True (fewer than ``trials_per_task``: an interrupted run);
    ``models`` gives a task's model (by default a task ``x@m`` is on model ``m``)."""
    if trials_per_task is None:
        trials_per_task = max(len(p) for p in passes.values())
    config = {
        "trials_per_task": trials_per_task,
        "tasks": {
            t: {
                "environment_id": "e",
                "model": (models or {}).get(t, t.rpartition("@")[2] if "@" in t else None),
            }
            for t in passes
        },
    }
    records = {
        (t, r): TrialRecord(
            t, r, TrialStatus.COMPLETED, evaluation=Evaluation(float(ok), ok), commits=3
        )
        for t, outcomes in passes.items()
        for r, ok in enumerate(outcomes)
    }
    return build_report(benchmark_id, config, records=records, k_values=k_values)


def outcomes(n: int, c: int) -> list[bool]:
    """n trials, the first c passing."""
    return [r < c for r in range(n)]


def bare_report(benchmark_id: str, counts: Mapping[str, tuple[int, int]]) -> BenchmarkReport:
    """A report of tasks given as (trials, passed), with no means and no intervals:
    what `corral.compare` reads, made in microseconds for simulations."""
    tasks = {
        t: TaskReport(
            t,
            [
                TrialRecord(t, r, TrialStatus.COMPLETED, evaluation=Evaluation(1.0, r < c))
                for r in range(n)
            ],
            {},
        )
        for t, (n, c) in counts.items()
    }
    return BenchmarkReport(
        benchmark_id=benchmark_id,
        tasks=tasks,
        pass_at_k={},
        counts={},
        usage=Usage(),
        trials_per_task=max(n for n, _ in counts.values()),
        k_values=(1,),
        started_at=0.0,
        finished_at=0.0,
    )
