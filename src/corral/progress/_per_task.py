"""``max_parallel_per_task`` said where it bites: what it holds back now, and what it
held back over a run (its default of 1 runs a task's trials one after another)."""

from __future__ import annotations

from ..scheduler import Limits, Statistics


def held_by_task(statistics: Statistics, limits: Limits) -> str | None:
    """Why trials that are not queued wait, when ``max_parallel_per_task`` is what holds
    them (an execution slot is free); else None."""
    s = statistics
    n = s.held_by_task
    if (
        not n
        or s.executing >= limits.max_parallel
        or s.executing + s.evaluating >= limits.max_parallel_total
    ):
        return None
    trials = "1 trial waits for its" if n == 1 else f"{n:,} trials wait for their"
    return f"max_parallel_per_task {limits.max_parallel_per_task}: {trials} task's earlier trials"


def per_task_note(statistics: Statistics, limits: Limits) -> str | None:
    """For the run's summary: how often trials waited for an earlier trial of their
    task while execution slots were free, and the flag that changes it; None if never."""
    waits, tasks = statistics.task_limit_waits, statistics.task_limit_tasks
    if not waits:
        return None
    names = ", ".join(tasks[:3]) + (f" and {len(tasks) - 3:,} more" if len(tasks) > 3 else "")
    k = limits.max_parallel_per_task
    if k == 1:
        why = (
            "max_parallel_per_task is 1, so a task's trials run one after another "
            "(each sees the previous one's evaluation)"
        )
    else:
        why = f"max_parallel_per_task is {k}, so at most {k} trials of a task run at once"
    times = "once" if waits == 1 else f"{waits:,} times"
    return (
        f"trials of {names} waited {times} for an earlier trial of their task while "
        f"execution slots were free: {why}; --max-parallel-per-task N lets more of them overlap"
    )
