"""Admission, the one decision of what starts: pure bookkeeping, tested without I/O."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral import BenchmarkTaskMetadata, Limits
from corral import TrialStatus as S
from corral.scheduler import Admission, _admission, build_plan
from corral.scheduler._admission import Start, StartKind

from ..support.limits_model import Model, Scenario, scenarios

EXECUTE, EVALUATE, UNREACHABLE = StartKind.EXECUTE, StartKind.EVALUATE, StartKind.UNREACHABLE


class Driver:
    """An `Admission` with task ids instead of indices."""

    def __init__(
        self,
        tasks: Mapping[str, BenchmarkTaskMetadata],
        *,
        trials: int = 1,
        eval_keys: Mapping[str, str] | None = None,
        **limits: object,
    ) -> None:
        self.plan = build_plan(tasks, None, include_dependencies=True, trials_per_task=trials)
        self.ids = self.plan.task_ids
        keys = [
            (eval_keys or {}).get(t, m.environment_id)
            for t, m in zip(self.ids, self.plan.metadata, strict=True)
        ]
        self.admission = Admission(self.plan, Limits.resolve(**limits), keys)  # type: ignore[arg-type]

    def starts(self) -> list[tuple[str, str, int]]:
        return [self.name(s) for s in self.admission.next_starts()]

    def name(self, start: Start) -> tuple[str, str, int]:
        return (start.kind.name.lower(), self.ids[start.task], start.round)

    def ended(self, task_id: str, r: int, status: S = S.COMPLETED) -> None:
        self.admission.execution_ended(self.ids.index(task_id), r, status)

    def evaluated(self, task_id: str, r: int) -> None:
        self.admission.evaluation_ended(self.ids.index(task_id), r)

    def recorded(self, task_id: str, r: int) -> None:
        self.admission.unreachable_recorded(self.ids.index(task_id), r)


def meta(model: str | None = None, env: str = "e", *parents: str) -> BenchmarkTaskMetadata:
    return BenchmarkTaskMetadata("a", env, model=model, dependencies=parents)


def test_a_saturated_model_does_not_hide_a_trial_that_fits() -> None:
    d = Driver(
        {"n1": meta("narrow"), "n2": meta("narrow"), "n3": meta("narrow"), "w1": meta("wide")},
        max_parallel=3,
        max_parallel_by_model={"narrow": 1},
    )
    assert d.starts() == [("execute", "n1", 0), ("execute", "w1", 0)]
    stats = d.admission.statistics()
    assert (stats.executing, stats.ready, stats.by_model["narrow"]) == (2, 2, 1)
    d.ended("w1", 0)
    assert d.starts() == [("evaluate", "w1", 0)]  # the narrow model is still full
    d.ended("n1", 0)
    assert d.starts() == [("evaluate", "n1", 0), ("execute", "n2", 0)]


def test_environment_limits_count_executions_by_environment_id() -> None:
    d = Driver(
        {"a": meta(env="docker"), "b": meta(env="docker"), "c": meta(env="local")},
        max_parallel_by_environment={"docker": 1},
    )
    assert d.starts() == [("execute", "a", 0), ("execute", "c", 0)]
    assert d.admission.statistics().by_environment == {"docker": 1}


def test_evaluation_limits_are_keyed_by_evaluation_name_and_global() -> None:
    tasks = {t: meta(env=t) for t in "abcd"}
    d = Driver(
        tasks,
        eval_keys={"a": "grader", "b": "grader"},  # c and d are keyed by their ids
        max_parallel=4,
        max_parallel_evaluations=2,
        max_parallel_evaluations_by_environment={"grader": 1},
    )
    assert len(d.starts()) == 4
    for t in "abcd":
        d.ended(t, 0)
    assert d.starts() == [("evaluate", "a", 0), ("evaluate", "c", 0)]
    assert d.admission.statistics().evaluations_by_environment == {"grader": 1}
    d.evaluated("a", 0)
    assert d.starts() == [("evaluate", "b", 0)]


def test_evaluations_go_first_when_the_total_binds() -> None:
    d = Driver({"a": meta(), "b": meta(), "c": meta()}, max_parallel=2, max_parallel_total=2)
    assert d.starts() == [("execute", "a", 0), ("execute", "b", 0)]
    d.ended("a", 0)
    assert d.starts() == [("evaluate", "a", 0)]
    d.evaluated("a", 0)
    assert d.starts() == [("execute", "c", 0)]


def test_evaluation_holds_no_execution_slot() -> None:
    d = Driver({"a": meta(), "b": meta()}, max_parallel=1)
    assert d.starts() == [("execute", "a", 0)]
    d.ended("a", 0)
    assert d.starts() == [("evaluate", "a", 0), ("execute", "b", 0)]


def test_sequential_trials_wait_for_the_previous_evaluation() -> None:
    d = Driver({"a": meta()}, trials=3, max_parallel=4)
    assert d.starts() == [("execute", "a", 0)]
    d.ended("a", 0)
    assert d.starts() == [("evaluate", "a", 0)]
    d.evaluated("a", 0)
    assert d.starts() == [("execute", "a", 1)]
    d.ended("a", 1, S.ERROR)  # ended without an evaluation: the next round may start
    assert d.starts() == [("execute", "a", 2)]


def test_trials_overlap_up_to_the_per_task_limit() -> None:
    d = Driver({"a": meta()}, trials=4, max_parallel=8, max_parallel_per_task=3)
    assert d.starts() == [("execute", "a", 0), ("execute", "a", 1), ("execute", "a", 2)]
    d.ended("a", 1)
    assert d.starts() == [("evaluate", "a", 1), ("execute", "a", 3)]


def test_unreachable_children_are_recorded_transitively() -> None:
    d = Driver({"p": meta(), "c": meta(None, "e", "p"), "g": meta(None, "e", "c"), "x": meta()})
    assert d.starts() == [("execute", "p", 0), ("execute", "x", 0)]
    d.ended("p", 0, S.ERROR)
    assert d.starts() == [("unreachable", "c", 0)]
    d.recorded("c", 0)
    assert d.starts() == [("unreachable", "g", 0)]
    d.recorded("g", 0)
    d.ended("x", 0)
    assert d.starts() == [("evaluate", "x", 0)]
    d.evaluated("x", 0)
    assert d.admission.complete


def test_a_child_starts_once_every_parent_completed() -> None:
    d = Driver({"p": meta(), "q": meta(), "c": meta(None, "e", "p", "q")})
    assert d.starts() == [("execute", "p", 0), ("execute", "q", 0)]
    d.ended("p", 0)
    assert ("execute", "c", 0) not in d.starts()
    d.ended("q", 0)
    assert ("execute", "c", 0) in d.starts()


def test_the_critical_path_goes_first() -> None:
    # "deep" heads a chain of three; "flat" stands alone and comes first in the mapping.
    tasks = {
        "flat": meta(),
        "deep": meta(),
        "mid": meta(None, "e", "deep"),
        "end": meta(None, "e", "mid"),
    }
    d = Driver(tasks, max_parallel=1)
    assert d.starts() == [("execute", "deep", 0)]


def test_a_scarce_resource_goes_first_among_equals() -> None:
    # "slow" is alone on an environment limited to 1. In plain round and task order
    # it would wait behind the other tasks while its one slot sits idle.
    d = Driver(
        {"fast_a": meta(), "fast_b": meta(), "slow": meta(env="slow")},
        trials=2,
        max_parallel=2,
        max_parallel_per_task=2,
        max_parallel_by_environment={"slow": 1},
    )
    assert d.starts() == [("execute", "slow", 0), ("execute", "fast_a", 0)]
    d.ended("fast_a", 0)
    assert d.starts() == [("evaluate", "fast_a", 0), ("execute", "fast_b", 0)]
    d.ended("slow", 0)  # round 1 of "slow" and of "fast_a" tie: the scarce one goes
    assert d.starts() == [("evaluate", "slow", 0), ("execute", "slow", 1)]


def test_the_ready_queue_holds_one_entry_per_task_however_many_rounds_fit() -> None:
    d = Driver({f"t{i}": meta() for i in range(100)}, trials=4, max_parallel_per_task=4)
    d.starts()
    assert d.admission.statistics().ready == 100  # one per task, not 400 - 4


def test_admission_state_is_bounded_by_the_limits_not_the_trials() -> None:
    d = Driver({f"t{i}": meta() for i in range(5000)}, trials=4, max_parallel=8)
    assert len(d.starts()) == 8
    stats = d.admission.statistics()
    # One ready entry per task at most, never one object per trial.
    assert (stats.executing, stats.total, stats.ready) == (8, 20000, 4992)


def test_child_round_is_not_held_behind_an_earlier_round() -> None:
    d = Driver({"p": meta(), "c": meta(None, "e", "p")}, trials=2, max_parallel_per_task=2)
    assert d.starts() == [("execute", "p", 0), ("execute", "p", 1)]
    d.ended("p", 1)  # the parent's round 1 ends first: the child's round 1 is ready and fits
    assert ("execute", "c", 1) in d.starts()


def test_an_unreachable_trial_found_while_starting_is_returned_at_once() -> None:
    d = Driver({"p": meta(), "c": meta(None, "e", "p")}, trials=2, max_parallel_per_task=2)
    assert d.starts() == [("execute", "p", 0), ("execute", "p", 1)]
    d.ended("p", 1, S.ERROR)
    d.ended("p", 0)
    # c's round 1 is unreachable as soon as p's round 1 failed: it is returned with
    # the next starts, not held back until c's round 0 has started.
    assert sorted(d.starts()) == sorted(
        [("evaluate", "p", 0), ("execute", "c", 0), ("unreachable", "c", 1)]
    )


def test_the_round_after_an_unreachable_one_is_considered_at_once() -> None:
    d = Driver({"p": meta(), "c": meta(None, "e", "p")}, trials=2, max_parallel_per_task=2)
    assert d.starts() == [("execute", "p", 0), ("execute", "p", 1)]
    d.ended("p", 1)
    d.ended("p", 0, S.ERROR)
    # c's round 0 is unreachable; its round 1 has a completed parent and fits.
    assert d.starts() == [("unreachable", "c", 0), ("evaluate", "p", 1), ("execute", "c", 1)]


# -- the property: never over a limit, always work-conserving --------------


def simulate(scenario: Scenario, pick: st.DataObject) -> None:
    """Run admission to the end, completing running work in an order ``pick`` chooses."""
    plan = build_plan(
        scenario.tasks, None, include_dependencies=True, trials_per_task=scenario.trials
    )
    ids = plan.task_ids
    admission = Admission(plan, scenario.limits, [scenario.eval_key(t) for t in ids])
    model = Model(scenario)
    running: list[tuple[StartKind, tuple[str, int]]] = []
    while True:
        for start in admission.next_starts():
            trial = (ids[start.task], start.round)
            {
                EXECUTE: model.execution_started,
                EVALUATE: model.evaluation_started,
                UNREACHABLE: model.unreachable_started,
            }[start.kind](trial)
            running.append((start.kind, trial))
        stats = admission.statistics()
        assert (stats.executing, stats.evaluating) == (
            model.gauge.count("exec"),
            model.gauge.count("eval"),
        )
        model.assert_work_conserving()
        if not running:
            break
        kind, trial = running.pop(pick.draw(st.integers(0, len(running) - 1), label="finish"))
        t = ids.index(trial[0])
        if kind == EXECUTE:
            status = scenario.outcomes[trial]
            admission.execution_ended(t, trial[1], status)
            model.execution_ended(trial, status)
        elif kind == EVALUATE:
            admission.evaluation_ended(t, trial[1])
            model.evaluation_ended(trial)
        else:
            admission.unreachable_recorded(t, trial[1])
            model.unreachable_recorded(trial)
    assert admission.complete and model.finished
    model.gauge.assert_ok()


# 100 random scenarios a run (each run draws others; the reference model checks every step).
@settings(max_examples=100, deadline=None)
@given(scenarios(max_tasks=8, max_trials=4), st.data())
def test_admission_never_exceeds_a_limit_and_conserves_work(
    scenario: Scenario, pick: st.DataObject
) -> None:
    simulate(scenario, pick)


def _state(admission: Admission) -> dict[str, object]:
    """Everything admission holds, its ready queues as lists (but its counters and
    their order, which are made apart from the queues)."""
    state = {
        k: v
        for k, v in vars(admission).items()
        if k not in ("counters", "_adaptive", "_eval_order")
    }
    state["_ready"] = [
        (bucket, list(q.tasks), list(q.rounds), q.at, q.heap)
        for bucket, q in admission._ready.items()
    ]
    return state


@settings(max_examples=100, deadline=None)
@given(scenarios(max_tasks=8, max_trials=4))
def test_a_fresh_admission_is_the_one_built_task_by_task(scenario: Scenario) -> None:
    """A run that starts afresh queues its first rounds at once (`_queue_first_rounds`):
    the same state as considering every task in turn, as a resumed run does."""
    plan = build_plan(
        scenario.tasks, None, include_dependencies=True, trials_per_task=scenario.trials
    )
    keys = [scenario.eval_key(t) for t in plan.task_ids]
    fresh = Admission(plan, scenario.limits, keys)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_admission, "_fresh", lambda phase: False)
        by_task = Admission(plan, scenario.limits, keys)
    assert _state(fresh) == _state(by_task)
