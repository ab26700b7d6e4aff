"""The run's concurrency limits, validated once, with their defaults."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._errors import ConfigError
from .._suggest import did_you_mean


def positive_int(name: str, value: Any) -> int:
    """``value`` if it is an integer >= 1 (bools are not), else a `ConfigError` naming it."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a positive integer, not {value!r}")
    if value < 1:
        raise ConfigError(f"{name} must be a positive integer, not {value!r}")
    return value


def _keyed(name: str, value: Mapping[str, int] | None) -> Mapping[str, int]:
    if value is None:
        return MappingProxyType({})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must be a mapping of name to limit, not {value!r}")
    out = {}
    for key, limit in value.items():
        if not isinstance(key, str):
            raise ConfigError(f"{name} keys must be strings, not {key!r}")
        out[key] = positive_int(f"{name}[{key!r}]", limit)
    return MappingProxyType(out)


@dataclass(frozen=True, slots=True)
class Limits:
    """Every limit of a run, resolved (README, "Limits", lists them): evaluations default
    to ``max_parallel``, the total to ``max_parallel`` + evaluations; a keyed limit
    bounds only the ids it names."""

    max_parallel: int = 4
    max_parallel_per_task: int = 1
    max_parallel_evaluations: int = 4
    max_parallel_total: int = 8
    max_parallel_by_model: Mapping[str, int] = field(default_factory=dict)
    max_parallel_by_environment: Mapping[str, int] = field(default_factory=dict)
    max_parallel_evaluations_by_environment: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def resolve(
        cls,
        *,
        max_parallel: int = 4,
        max_parallel_per_task: int = 1,
        max_parallel_evaluations: int | None = None,
        max_parallel_total: int | None = None,
        max_parallel_by_model: Mapping[str, int] | None = None,
        max_parallel_by_environment: Mapping[str, int] | None = None,
        max_parallel_evaluations_by_environment: Mapping[str, int] | None = None,
    ) -> Limits:
        """Validate every limit and fill in the defaults; raise `ConfigError` naming a bad one."""
        parallel = positive_int("max_parallel", max_parallel)
        per_task = positive_int("max_parallel_per_task", max_parallel_per_task)
        evaluations = (
            parallel
            if max_parallel_evaluations is None
            else positive_int("max_parallel_evaluations", max_parallel_evaluations)
        )
        total = (
            parallel + evaluations
            if max_parallel_total is None
            else positive_int("max_parallel_total", max_parallel_total)
        )
        return cls(
            max_parallel=parallel,
            max_parallel_per_task=per_task,
            max_parallel_evaluations=evaluations,
            max_parallel_total=total,
            max_parallel_by_model=_keyed("max_parallel_by_model", max_parallel_by_model),
            max_parallel_by_environment=_keyed(
                "max_parallel_by_environment", max_parallel_by_environment
            ),
            max_parallel_evaluations_by_environment=_keyed(
                "max_parallel_evaluations_by_environment",
                max_parallel_evaluations_by_environment,
            ),
        )

    def check_keys(
        self,
        models: Collection[str],
        environments: Collection[str],
        evaluation_keys: Collection[str],
    ) -> None:
        """Refuse a keyed limit whose key names no model, environment id or environment
        name the runner knows (a typo would silently bound nothing). A key that only
        unselected tasks use is fine."""
        for name, limits, known, what in (
            ("max_parallel_by_model", self.max_parallel_by_model, models, "model"),
            (
                "max_parallel_by_environment",
                self.max_parallel_by_environment,
                environments,
                "environment id",
            ),
            (
                "max_parallel_evaluations_by_environment",
                self.max_parallel_evaluations_by_environment,
                evaluation_keys,
                "environment name or id",
            ),
        ):
            for key in limits:
                if key in known:
                    continue
                raise ConfigError(
                    f"{name} names {key!r}, which is no {what} of this runner's tasks "
                    f"(known: {_some(known)}){did_you_mean(key, known)}"
                )

    def to_dict(self) -> dict[str, Any]:
        return {
            "max_parallel": self.max_parallel,
            "max_parallel_per_task": self.max_parallel_per_task,
            "max_parallel_evaluations": self.max_parallel_evaluations,
            "max_parallel_total": self.max_parallel_total,
            "max_parallel_by_model": dict(self.max_parallel_by_model),
            "max_parallel_by_environment": dict(self.max_parallel_by_environment),
            "max_parallel_evaluations_by_environment": dict(
                self.max_parallel_evaluations_by_environment
            ),
        }


def _some(names: Collection[str], shown: int = 8) -> str:
    ordered = sorted(names)
    text = ", ".join(map(repr, ordered[:shown]))
    more = len(ordered) - shown
    return (text + f" and {more} more" if more > 0 else text) or "none"
