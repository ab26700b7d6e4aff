"""Keyed limits as data: every `KeyedLimit` declaration is wired through `Limits`,
admission's counters, `Statistics`, `RunConfig`, the progress view and the CLI."""

from __future__ import annotations

import pytest

from corral import BenchmarkTaskMetadata, ConfigError, Limits, RunConfig, Statistics
from corral._run_config import SETTINGS
from corral.cli._run import run_command
from corral.progress._view import queue_reasons, utilisation
from corral.scheduler import (
    KEYED_LIMITS,
    Admission,
    KeyedLimit,
    KnownKeys,
    LimitPhase,
    build_plan,
)

from ..support.extra_limit import BY_AGENT, WITH_AGENT

IDS = [limit.setting for limit in KEYED_LIMITS]


@pytest.mark.parametrize("limit", KEYED_LIMITS, ids=IDS)
def test_each_declaration_is_a_limit_a_statistic_a_setting_and_a_flag(limit: KeyedLimit) -> None:
    assert limit.setting in Limits().caps
    assert limit.setting in SETTINGS
    # The built-in declarations keep their typed names.
    assert getattr(Limits(**{limit.setting: {"k": 1}}), limit.setting) == {"k": 1}  # type: ignore[arg-type]
    statistics = Statistics(0, 0, 0, 0, 0, 0, **{limit.statistics: {"k": 1}})
    assert getattr(statistics, limit.statistics) == statistics.used(limit) == {"k": 1}
    if limit.adaptive:
        statistics = Statistics(0, 0, 0, 0, 0, 0, **{"effective_" + limit.statistics: {"k": 1}})
        assert getattr(statistics, "effective_" + limit.statistics) == {"k": 1}
    assert limit.flag in {opt for param in run_command.params for opt in param.opts}
    with pytest.raises(ConfigError, match=rf"{limit.setting}\['k'\]"):
        RunConfig.of(**{limit.setting: {"k": 0}})
    with pytest.raises(ConfigError, match=f"{limit.setting} names 'nope'"):
        Limits(**{limit.setting: {"nope": 1}}).check_keys(KnownKeys())  # type: ignore[arg-type]


def test_at_most_one_declaration_adapts_to_rate_limits() -> None:
    assert sum(limit.adaptive for limit in KEYED_LIMITS) <= 1


def _admission(**limits: object) -> Admission:
    tasks = {
        "a": BenchmarkTaskMetadata("agent", "e1", model="m1"),
        "b": BenchmarkTaskMetadata("agent", "e2", model="m2"),
    }
    plan = build_plan(tasks, None, include_dependencies=True, trials_per_task=4)
    return Admission(plan, Limits.resolve(**limits), ["e1", "e2"])  # type: ignore[arg-type]


def test_admission_keeps_one_counter_array_per_declaration() -> None:
    admission = _admission(
        max_parallel=8,
        max_parallel_per_task=4,
        max_parallel_by_model={"m1": 1},
        max_parallel_by_environment={"e2": 2},
        max_parallel_evaluations_by_environment={"e1": 1},
    )
    assert [c.limit for c in admission.counters] == list(KEYED_LIMITS)
    started = admission.next_starts()
    # m1 lets one of a's trials run, e2 two of b's.
    assert sorted(admission.plan.task_ids[s.task] for s in started) == ["a", "b", "b"]
    statistics = admission.statistics()
    by_setting = {limit.setting: statistics.used(limit) for limit in KEYED_LIMITS}
    assert by_setting == {
        "max_parallel_by_model": {"m1": 1, "m2": 2},  # every model counts (rate limits)
        "max_parallel_by_environment": {"e2": 2},
        "max_parallel_evaluations_by_environment": {"e1": 0},
    }
    limits = admission.limits
    rows = {label: (used, cap) for label, used, cap in utilisation(statistics, limits)}
    assert rows["model m1"] == (1, 1) and rows["environment e2"] == (2, 2)
    assert rows["evaluations in e1"] == (0, 1)
    assert queue_reasons(statistics, limits) == ["model m1 1/1", "environment e2 2/2"]


def test_phases_split_the_declarations() -> None:
    phases = {limit.setting: limit.phase for limit in KEYED_LIMITS}
    assert phases["max_parallel_evaluations_by_environment"] is LimitPhase.EVALUATION
    assert phases["max_parallel_by_model"] is LimitPhase.EXECUTION


def test_limits_resolve_takes_every_declared_keyed_limit_and_refuses_others() -> None:
    limits = Limits.resolve(**{limit.setting: {"k": 2} for limit in KEYED_LIMITS})
    assert all(limits.keyed(limit) == {"k": 2} for limit in KEYED_LIMITS)
    with pytest.raises(ConfigError, match="unknown limit 'max_parallel_by_modle'"):
        Limits.resolve(max_parallel_by_modle={"k": 1})


def test_a_new_limit_kind_is_one_declaration() -> None:
    tasks = {
        "a": BenchmarkTaskMetadata("solo", "e1"),
        "b": BenchmarkTaskMetadata("solo", "e2"),
        "c": BenchmarkTaskMetadata("pair", "e1"),
    }
    plan = build_plan(tasks, None, include_dependencies=True, trials_per_task=3)
    limits = Limits.resolve(
        max_parallel=8,
        max_parallel_per_task=3,
        declarations=WITH_AGENT,
        max_parallel_by_agent={"solo": 2},
    )
    assert limits.keyed(BY_AGENT) == {"solo": 2}
    admission = Admission(plan, limits, ["e1", "e2", "e1"])
    # Enforced: two of the six "solo" trials start, all three "pair" ones.
    started = [admission.plan.task_ids[s.task] for s in admission.next_starts()]
    assert started.count("c") == 3 and len(started) == 5
    # Counted in Statistics, by its statistics name.
    statistics = admission.statistics()
    assert statistics.used(BY_AGENT) == {"solo": 2}
    # Shown by the progress view.
    rows = {label: (used, cap) for label, used, cap in utilisation(statistics, limits)}
    assert rows["agent solo"] == (2, 2)
    assert queue_reasons(statistics, limits) == ["agent solo 2/2"]
    # Its keys are checked against what the runner knows, and its setting is refused
    # where it is not declared.
    with pytest.raises(ConfigError, match="max_parallel_by_agent names 'trio'"):
        Limits(declarations=(BY_AGENT,), max_parallel_by_agent={"trio": 1}).check_keys(KnownKeys())
    with pytest.raises(ConfigError, match="unknown limit 'max_parallel_by_agent'"):
        Limits.resolve(max_parallel_by_agent={"solo": 1})
    # A RunConfig keeps the declarations when a setting changes.
    config = RunConfig(limits=limits).updated(max_parallel=4)
    assert config.limits.keyed(BY_AGENT) == {"solo": 2} and config.limits.max_parallel == 4
