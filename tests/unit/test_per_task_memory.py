"""What the scheduler keeps per task, counted with tracemalloc: a run of 100,000 tasks
plans and admits in a few tens of bytes a task beyond the plan itself."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

from corral import BenchmarkTaskMetadata, Limits, TrialRecord, TrialStatus
from corral._positions import Positions
from corral.report._build import HeadTally
from corral.scheduler._admission import Admission
from corral.scheduler._handoffs import Handoffs
from corral.scheduler._plan import RunPlan, build_plan
from corral.scheduler._resume import Resume
from corral.store._heads import TaskList

N = 10_000  # per-task bytes: the same at 50,000 (fixed costs are a few bytes a task here)


def _plan() -> RunPlan:
    tasks = {f"t{i}": BenchmarkTaskMetadata("a", "e") for i in range(N)}
    return build_plan(tasks, None, include_dependencies=True, trials_per_task=1)


def _kept_per_task(make: Callable[[], Any]) -> float:
    tracemalloc.start()
    kept = make()
    size = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del kept
    return size / N


def test_a_fresh_run_keeps_little_per_task_to_resume() -> None:
    plan = _plan()
    # Two arrays of a byte a trial and a list of a reference a task (an index of the
    # task ids, and an array per task, took some 190 bytes a task).
    assert _kept_per_task(lambda: Resume(plan)) < 16


def test_admission_shares_what_tasks_have_in_common() -> None:
    plan = _plan()
    keys = ["e"] * N
    # Per task: its entry in the ready queue (a task index and a round in arrays) and
    # a dozen lists of references, some 120 bytes (a tuple and an int in a heap per
    # task took some 95 bytes more; a bucket and slots of its own some 230 more).
    assert _kept_per_task(lambda: Admission(plan, Limits.resolve(), keys)) < 140


def test_planning_tasks_without_dependencies_builds_no_index() -> None:
    tasks = {f"t{i}": BenchmarkTaskMetadata("a", "e") for i in range(N)}
    tracemalloc.start()
    plan = build_plan(tasks, None, include_dependencies=True, trials_per_task=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # The plan's tuples and the ids in order (a dict and a set of the ids, and a list
    # per task, took some 240 bytes a task).
    assert peak / N < 80
    assert plan.depth == (1,) * N and plan.children == ((),) * N


def test_no_state_is_kept_for_a_trial_no_later_trial_follows() -> None:
    tasks = {"t": BenchmarkTaskMetadata("a", "e")}

    def kept(trials: int, finished: list[int]) -> int | None:
        plan = build_plan(tasks, None, include_dependencies=True, trials_per_task=trials)
        handoffs = Handoffs(plan, Resume(plan))
        for r in finished:
            handoffs.finished(0, TrialRecord("t", r, TrialStatus.COMPLETED, state={"big": r}))
        previous = handoffs._previous[0]
        return None if previous is None else previous.trial

    assert kept(1, [0]) is None  # a one-trial run keeps no final state per task
    assert kept(3, [0, 2]) == 0  # the last trial's state is never handed on
    assert kept(3, [1, 0]) == 1


def test_a_report_tally_finds_tasks_without_an_index_of_every_id() -> None:
    ids = [f"t{i}" for i in range(N)]
    tasks = TaskList(1, [(task_id, None, "e") for task_id in ids])
    # Per task: the ids, their positions in id order (an array) and two counts, some
    # 33 bytes (with a dict of every id to its position: 65).
    assert _kept_per_task(lambda: HeadTally(tasks)) < 40


def test_task_positions_are_found_in_any_order() -> None:
    ids = ["b", "a", "d", "c", "a2"]
    positions = Positions(ids)
    wanted = ["a", "a", "a2", "b", "c", "d", "d", "b", "zz", "a", "c", ""]
    assert [positions.get(t) for t in wanted] == [
        ids.index(t) if t in ids else None for t in wanted
    ]
