"""`Limits.resolve`: the defaults the README's "Limits" table lists, and refusal of bad values."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from corral import ConfigError, Limits, RunConfig


def test_defaults() -> None:
    limits = Limits.resolve()
    assert (limits.max_parallel, limits.max_parallel_per_task) == (4, 1)
    assert limits.max_parallel_evaluations == 4  # max_parallel
    assert limits.max_parallel_total == 8  # max_parallel + max_parallel_evaluations
    assert not limits.max_parallel_by_model
    assert not limits.max_parallel_by_environment
    assert not limits.max_parallel_evaluations_by_environment


def test_evaluations_and_total_follow_max_parallel() -> None:
    assert Limits.resolve(max_parallel=6).max_parallel_evaluations == 6
    assert Limits.resolve(max_parallel=6).max_parallel_total == 12
    limits = Limits.resolve(max_parallel=6, max_parallel_evaluations=2)
    assert limits.max_parallel_total == 8
    assert Limits.resolve(max_parallel=6, max_parallel_total=3).max_parallel_total == 3


def test_limits_built_directly_default_as_resolve_does() -> None:
    # Before, `Limits(max_parallel=16)` took evaluations 4 and a total of 8 (the
    # defaults of max_parallel=4): a run given it executed 8 trials at once, not 16.
    assert Limits(max_parallel=16) == Limits.resolve(max_parallel=16)
    assert Limits(max_parallel=16).max_parallel_total == 32
    assert Limits(max_parallel=6, max_parallel_evaluations=2).max_parallel_total == 8
    assert Limits(max_parallel=6, max_parallel_total=3).max_parallel_evaluations == 6
    # Filled in, they follow max_parallel as a config changes it, as resolve's do.
    config = RunConfig(limits=Limits(max_parallel=2)).updated(max_parallel=8)
    assert (config.limits.max_parallel_evaluations, config.limits.max_parallel_total) == (8, 16)
    with pytest.raises(ConfigError, match="max_parallel must be a positive integer, not 0"):
        Limits(max_parallel=0)


def test_keyed_limits_are_kept_read_only() -> None:
    given = {"gpt": 2}
    limits = Limits.resolve(
        max_parallel_by_model=given,
        max_parallel_by_environment={"docker": 1},
        max_parallel_evaluations_by_environment={"grader": 3},
    )
    given["gpt"] = 99
    assert limits.max_parallel_by_model == {"gpt": 2}
    assert isinstance(limits.max_parallel_by_model, MappingProxyType)
    assert limits.to_dict() == {
        "max_parallel": 4,
        "max_parallel_per_task": 1,
        "max_parallel_evaluations": 4,
        "max_parallel_total": 8,
        "max_parallel_by_model": {"gpt": 2},
        "max_parallel_by_environment": {"docker": 1},
        "max_parallel_evaluations_by_environment": {"grader": 3},
    }


SCALARS = [
    "max_parallel",
    "max_parallel_per_task",
    "max_parallel_evaluations",
    "max_parallel_total",
]
KEYED = [
    "max_parallel_by_model",
    "max_parallel_by_environment",
    "max_parallel_evaluations_by_environment",
]
BAD_VALUES = [0, -1, 1.5, 2.0, True, False, "2"]


@pytest.mark.parametrize("bad", BAD_VALUES, ids=repr)
@pytest.mark.parametrize("name", SCALARS)
def test_bad_scalar_limit_is_refused_by_name(name: str, bad: object) -> None:
    with pytest.raises(ConfigError, match=name) as info:
        Limits.resolve(**{name: bad})  # type: ignore[arg-type]
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", [*BAD_VALUES, None], ids=repr)
@pytest.mark.parametrize("name", KEYED)
def test_bad_keyed_limit_is_refused_by_name_and_key(name: str, bad: object) -> None:
    with pytest.raises(ConfigError, match=name) as info:
        Limits.resolve(**{name: {"ok": 1, "bad-key": bad}})  # type: ignore[arg-type]
    assert "'bad-key'" in str(info.value) and repr(bad) in str(info.value)


@pytest.mark.parametrize("name", ["max_parallel", "max_parallel_per_task"])
def test_none_is_refused_where_there_is_no_default(name: str) -> None:
    with pytest.raises(ConfigError, match=f"{name} must be a positive integer, not None"):
        Limits.resolve(**{name: None})  # type: ignore[arg-type]


@pytest.mark.parametrize("name", KEYED)
@pytest.mark.parametrize("bad", [[("m", 1)], 3, {1: 2}], ids=["pairs", "int", "int-key"])
def test_keyed_limit_must_be_a_mapping_of_strings(name: str, bad: object) -> None:
    with pytest.raises(ConfigError, match=name):
        Limits.resolve(**{name: bad})  # type: ignore[arg-type]


def test_config_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        Limits.resolve(max_parallel=0)
