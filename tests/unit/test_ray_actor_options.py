"""Corral's actors (hosts, the scope hub) keep their calls out of Ray's task events
unless told otherwise, where the Ray in use can (`executor._owner.actor_class`)."""

from __future__ import annotations

import types
from typing import Any

import pytest

from corral.executor._owner import actor_class


def fake_ray(known: set[str]) -> Any:
    """A `ray` whose `.options` takes only ``known`` keywords, as Ray's own checks do."""

    class Remote:
        def options(self, **options: Any) -> dict[str, Any]:
            for name in options:
                if name not in known:
                    raise ValueError(f"Invalid option keyword {name} for actors.")
            return options

    return types.SimpleNamespace(remote=lambda cls: Remote())


def test_the_calls_are_kept_out_of_task_events_by_default() -> None:
    ray = fake_ray({"enable_task_events", "num_cpus"})
    assert actor_class(ray, object, {"num_cpus": 0}) == {
        "enable_task_events": False,
        "num_cpus": 0,
    }


def test_the_caller_may_keep_them_in() -> None:
    ray = fake_ray({"enable_task_events", "num_cpus"})
    options = actor_class(ray, object, {"enable_task_events": True})
    assert options == {"enable_task_events": True}


def test_a_ray_without_the_option_gets_the_others() -> None:
    assert actor_class(fake_ray({"num_cpus"}), object, {"num_cpus": 2}) == {"num_cpus": 2}


def test_a_bad_option_still_fails_as_ray_says() -> None:
    with pytest.raises(ValueError, match="bogus"):
        actor_class(fake_ray({"enable_task_events"}), object, {"bogus": 1})


def test_the_installed_ray_knows_the_option() -> None:
    ray = pytest.importorskip("ray")

    class Probe:
        pass

    actor_class(ray, Probe, {"enable_task_events": False, "num_cpus": 0})  # no ValueError
