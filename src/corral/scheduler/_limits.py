"""The run's concurrency limits, validated once, with their defaults."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._checks import positive_int
from .._errors import ConfigError
from .._suggest import did_you_mean
from ._keyed import KEYED_LIMITS, KeyedLimit


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
    to ``max_parallel``, the total to ``max_parallel`` + evaluations (`resolve` fills
    them in); a keyed limit bounds only the ids it names. Checked when built: a bad
    limit is a `ConfigError` naming it."""

    max_parallel: int = 4
    max_parallel_per_task: int = 1
    max_parallel_evaluations: int = 4
    max_parallel_total: int = 8
    max_parallel_by_model: Mapping[str, int] = field(default_factory=dict)
    max_parallel_by_environment: Mapping[str, int] = field(default_factory=dict)
    max_parallel_evaluations_by_environment: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in _COUNTS:
            positive_int(name, getattr(self, name))
        for limit in KEYED_LIMITS:
            name = limit.setting
            object.__setattr__(self, name, _keyed(name, getattr(self, name)))

    @classmethod
    def resolve(
        cls,
        *,
        max_parallel: int = 4,
        max_parallel_per_task: int = 1,
        max_parallel_evaluations: int | None = None,
        max_parallel_total: int | None = None,
        **keyed: Mapping[str, int] | None,
    ) -> Limits:
        """Validate every limit and fill in the defaults; raise `ConfigError` naming a bad
        one. ``keyed``: a caps mapping (None: no limit) by each `KeyedLimit`'s setting
        (``max_parallel_by_model={...}``, ...)."""
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
        for name in keyed:
            if name not in _KEYED_SETTINGS:
                hint = did_you_mean(name, [*_COUNTS, *_KEYED_SETTINGS])
                raise ConfigError(f"unknown limit {name!r}{hint}")
        return cls(
            max_parallel=parallel,
            max_parallel_per_task=per_task,
            max_parallel_evaluations=evaluations,
            max_parallel_total=total,
            # None is no limit; anything else is checked in `__post_init__`.
            **{name: _NONE if caps is None else caps for name, caps in keyed.items()},
        )

    def check_keys(self, **known: Collection[str]) -> None:
        """Refuse a keyed limit whose key names nothing the runner knows (a typo would
        silently bound nothing): ``known`` gives, by the `KeyedLimit`'s `Statistics`
        field (``by_model=...``), the keys its tasks have. A key that only unselected
        tasks use is fine."""
        for limit in KEYED_LIMITS:
            names = known[limit.statistics]
            for key in self.keyed(limit):
                if key in names:
                    continue
                raise ConfigError(
                    f"{limit.setting} names {key!r}, which is no {limit.names} of this "
                    f"runner's tasks (known: {_some(names)}){did_you_mean(key, names)}"
                )

    def keyed(self, limit: KeyedLimit) -> Mapping[str, int]:
        """The caps of a keyed limit, by key."""
        caps: Mapping[str, int] = getattr(self, limit.setting)
        return caps

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in _COUNTS}
        out.update({limit.setting: dict(self.keyed(limit)) for limit in KEYED_LIMITS})
        return out


_NONE: Mapping[str, int] = MappingProxyType({})
_KEYED_SETTINGS = tuple(limit.setting for limit in KEYED_LIMITS)
_COUNTS = (
    "max_parallel",
    "max_parallel_per_task",
    "max_parallel_evaluations",
    "max_parallel_total",
)


def _some(names: Collection[str], shown: int = 8) -> str:
    ordered = sorted(names)
    text = ", ".join(map(repr, ordered[:shown]))
    more = len(ordered) - shown
    return (text + f" and {more} more" if more > 0 else text) or "none"
