"""Admission under rate-limit deferrals: a running trial gives its slots back, waits,
and is ready again ahead of new work; never over a limit, always work-conserving."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from corral.scheduler import Admission, build_plan
from corral.scheduler._admission import StartKind

from ..support.limits_model import DeferringModel, Scenario, Trial, scenarios

EXECUTE, EVALUATE, UNREACHABLE = StartKind.EXECUTE, StartKind.EVALUATE, StartKind.UNREACHABLE


def simulate(scenario: Scenario, pick: st.DataObject, *, cut: bool, stop: bool = False) -> None:
    plan = build_plan(
        scenario.tasks, None, include_dependencies=True, trials_per_task=scenario.trials
    )
    ids = plan.task_ids
    admission = Admission(plan, scenario.limits, [scenario.eval_key(t) for t in ids])
    model = DeferringModel(scenario)
    running: list[tuple[StartKind, Trial]] = []
    deferred: list[Trial] = []
    deferrals = 0
    stopped = False
    while True:
        for start in admission.next_starts():
            trial = (ids[start.task], start.round)
            if stopped and start.kind == EXECUTE:
                # After a stop only trials started before it go on (after a rate limit).
                assert trial in model.resumed, f"{trial} started after the stop"
            {
                EXECUTE: model.execution_started,
                EVALUATE: model.evaluation_started,
                UNREACHABLE: model.unreachable_started,
            }[start.kind](trial)
            running.append((start.kind, trial))
        stats = admission.statistics()
        model.effective = dict(stats.effective_by_model)
        assert (stats.executing, stats.evaluating, stats.deferred) == (
            model.gauge.count("exec"),
            model.gauge.count("eval"),
            len(deferred) + len(model.resumed),
        )
        if not stopped:
            model.assert_work_conserving()
        if not running and not deferred:
            break
        if stop and not stopped and pick.draw(st.integers(0, 5), label="stop") == 0:
            stopped = True
            admission.stop()
            continue
        choices = len(running) + len(deferred)
        i = pick.draw(st.integers(0, choices - 1), label="which")
        if i >= len(running):  # a rate limit's wait is over
            trial = deferred.pop(i - len(running))
            model.resume(trial)
            admission.resume_deferred(ids.index(trial[0]), trial[1])
            continue
        kind, trial = running.pop(i)
        t = ids.index(trial[0])
        if kind == EXECUTE and deferrals < 12 and pick.draw(st.booleans(), label="defer"):
            deferrals += 1
            if cut:
                admission.rate_limited(t)
            admission.defer(t, trial[1])
            model.defer(trial)
            deferred.append(trial)
        elif kind == EXECUTE:
            status = scenario.outcomes[trial]
            admission.execution_ended(t, trial[1], status)
            model.execution_ended(trial, status)
        elif kind == EVALUATE:
            admission.evaluation_ended(t, trial[1])
            model.evaluation_ended(trial)
        else:
            admission.unreachable_recorded(t, trial[1])
            model.unreachable_recorded(trial)
    assert admission.complete, admission.statistics()
    assert stopped or model.finished, model.phase
    model.gauge.assert_ok()


@settings(max_examples=200, deadline=None)
@given(scenarios(max_tasks=8, max_trials=4), st.data())
@pytest.mark.slow  # a property test of many examples (the full suite runs it)
def test_deferrals_never_exceed_a_limit_and_conserve_work(
    scenario: Scenario, pick: st.DataObject
) -> None:
    simulate(scenario, pick, cut=False)


@settings(max_examples=200, deadline=None)
@given(scenarios(max_tasks=8, max_trials=4), st.data())
@pytest.mark.slow  # a property test of many examples (the full suite runs it)
def test_rate_limits_never_exceed_a_limit_and_conserve_work(
    scenario: Scenario, pick: st.DataObject
) -> None:
    simulate(scenario, pick, cut=True)


@settings(max_examples=200, deadline=None)
@given(scenarios(max_tasks=8, max_trials=4), st.data())
@pytest.mark.slow  # a property test of many examples (the full suite runs it)
def test_a_stop_admits_only_what_started_and_completes(
    scenario: Scenario, pick: st.DataObject
) -> None:
    simulate(scenario, pick, cut=True, stop=True)
