"""The run's concurrency limits, validated once, with their defaults."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._checks import positive_int
from .._errors import ConfigError
from .._suggest import did_you_mean
from ._keyed import KEYED_LIMITS, KeyedLimit, KnownKeys


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


@dataclass(frozen=True, slots=True, init=False)
class Limits:
    """Every limit of a run, resolved (README, "Limits", lists them): evaluations default
    to ``max_parallel``, the total to ``max_parallel`` + evaluations (filled in when
    built, directly or by `resolve`); a keyed limit bounds only the ids it names.
    Checked when built: a bad limit is a `ConfigError` naming it.

    The keyed limits are the ``declarations`` (`KEYED_LIMITS` unless given): each
    one's caps are a keyword named by its setting (``max_parallel_by_model={...}``),
    kept in `caps` by setting and read with `keyed` (or the typed properties of the
    built-in ones)."""

    max_parallel: int
    max_parallel_per_task: int
    max_parallel_evaluations: int
    max_parallel_total: int
    #: Each declared keyed limit's caps (key -> cap), by its setting.
    caps: Mapping[str, Mapping[str, int]]
    declarations: tuple[KeyedLimit, ...]
    #: The counts `resolve` filled in, not given: they follow the counts they default
    #: from when a config changes those (`RunConfig.updated`). A count given stays as
    #: given, even equal to its default.
    #: (An argument, so that `dataclasses.replace` keeps it: a count changed away from
    #: its default stops following.)
    follows: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def __init__(
        self,
        max_parallel: int = 4,
        max_parallel_per_task: int = 1,
        max_parallel_evaluations: int | None = None,
        max_parallel_total: int | None = None,
        *,
        caps: Mapping[str, Mapping[str, int] | None] | None = None,
        declarations: Sequence[KeyedLimit] = KEYED_LIMITS,
        follows: Collection[str] = frozenset(),
        **keyed: Mapping[str, int] | None,
    ) -> None:
        put = object.__setattr__
        for name, value in (
            ("max_parallel", max_parallel),
            ("max_parallel_per_task", max_parallel_per_task),
        ):
            put(self, name, positive_int(name, value))
        # A count not given defaults (and follows) as the README's table says, here as in
        # `resolve`: fixed defaults of 4 and 8 held ``Limits(max_parallel=16)`` to 8
        # executions at once.
        following = set(follows)
        if max_parallel_evaluations is None:
            max_parallel_evaluations = self.max_parallel
            following.add("max_parallel_evaluations")
        evaluations = positive_int("max_parallel_evaluations", max_parallel_evaluations)
        put(self, "max_parallel_evaluations", evaluations)
        if max_parallel_total is None:
            max_parallel_total = self.max_parallel + evaluations
            following.add("max_parallel_total")
        put(self, "max_parallel_total", positive_int("max_parallel_total", max_parallel_total))
        declared = tuple(declarations)
        settings = [limit.setting for limit in declared]
        given = {**(caps or {}), **keyed}
        for name in given:
            if name not in settings:
                hint = did_you_mean(name, [*_COUNTS, *settings])
                raise TypeError(f"Limits() got an unexpected keyword argument {name!r}{hint}")
        put(self, "declarations", declared)
        put(self, "caps", MappingProxyType({n: _keyed(n, given.get(n)) for n in settings}))
        # A count follows only while it is what it defaults to (`replace` keeps follows).
        derived = {
            "max_parallel_evaluations": self.max_parallel,
            "max_parallel_total": self.max_parallel + self.max_parallel_evaluations,
        }
        put(self, "follows", frozenset(n for n in following if getattr(self, n) == derived.get(n)))

    @property
    def max_parallel_by_model(self) -> Mapping[str, int]:
        """Executions on one model, by model."""
        return self.caps["max_parallel_by_model"]

    @property
    def max_parallel_by_environment(self) -> Mapping[str, int]:
        """Executions in one environment, by environment id."""
        return self.caps["max_parallel_by_environment"]

    @property
    def max_parallel_evaluations_by_environment(self) -> Mapping[str, int]:
        """Evaluations in one environment, by its name or id."""
        return self.caps["max_parallel_evaluations_by_environment"]

    @classmethod
    def resolve(
        cls,
        *,
        max_parallel: int = 4,
        max_parallel_per_task: int = 1,
        max_parallel_evaluations: int | None = None,
        max_parallel_total: int | None = None,
        declarations: Sequence[KeyedLimit] = KEYED_LIMITS,
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
        settings = [limit.setting for limit in declarations]
        for name in keyed:
            if name not in settings:
                hint = did_you_mean(name, [*_COUNTS, *settings])
                raise ConfigError(f"unknown limit {name!r}{hint}")
        return cls(
            max_parallel=parallel,
            max_parallel_per_task=per_task,
            max_parallel_evaluations=evaluations,
            max_parallel_total=total,
            caps=keyed,  # None is no limit; the rest is checked when built
            declarations=declarations,
            follows=[
                name
                for name, value in (
                    ("max_parallel_evaluations", max_parallel_evaluations),
                    ("max_parallel_total", max_parallel_total),
                )
                if value is None
            ],
        )

    def check_keys(self, known: KnownKeys) -> None:
        """Refuse a keyed limit whose key names nothing the runner knows (a typo would
        silently bound nothing): each declaration picks its names from ``known`` (the
        runner's models, environments, evaluation keys). A key that only unselected
        tasks use is fine."""
        for limit in self.declarations:
            names = limit.known(known)
            for key in self.keyed(limit):
                if key in names:
                    continue
                raise ConfigError(
                    f"{limit.setting} names {key!r}, which is no {limit.names} of this "
                    f"runner's tasks (known: {_some(names)}){did_you_mean(key, names)}"
                )

    def keyed(self, limit: KeyedLimit) -> Mapping[str, int]:
        """The caps of a keyed limit, by key."""
        return self.caps[limit.setting]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in _COUNTS}
        out.update({name: dict(caps) for name, caps in self.caps.items()})
        return out


#: The limits that are one count each.
LIMIT_COUNTS = _COUNTS = (
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
