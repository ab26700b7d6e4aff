"""The keyed limits, declared once: admission keeps one counter array per declaration,
and `Limits`, `Statistics`, the progress view and the CLI loop over them.

A new kind of keyed limit is one `KeyedLimit` in `KEYED_LIMITS`: `Limits` keeps its caps
by setting, `Statistics` its slots in use by statistics name, `RunConfig` and the CLI
take its setting, and `Limits.check_keys` its `known` names. (A typed property on
`Limits`/`Statistics` and a `RunSettings` entry only serve static type checkers.)
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from .._types import BenchmarkTaskMetadata


@dataclass(frozen=True, slots=True)
class KnownKeys:
    """What the runner knows, that a keyed limit's keys may name."""

    models: Collection[str] = ()
    environment_ids: Collection[str] = ()
    #: What keys each environment's evaluations: its name, else its id.
    evaluation_keys: Collection[str] = ()


class LimitPhase(Enum):
    """What a keyed limit's slot is held for."""

    EXECUTION = "execution"
    EVALUATION = "evaluation"


@dataclass(frozen=True, slots=True)
class KeyedLimit:
    """One kind of limit that bounds, per key, the trials holding its phase's slot."""

    #: The `Limits` field, `run` keyword and ``--`` flag (with dashes): key -> cap.
    setting: str
    phase: LimitPhase
    #: Every task's key under this limit (None: unbounded), in task order, from their
    #: metadata and their evaluation keys (the environment's name, else its id): one
    #: call per run, not one per task.
    keys: Callable[[Sequence[BenchmarkTaskMetadata], Sequence[str]], list[str | None]]
    #: The `Statistics` field of the slots in use per key.
    statistics: str
    #: How the progress view names a key's row (``"model gpt-x"``).
    label: str
    #: What a key must name, for the refusal of an unknown one.
    names: str
    #: The ``--`` flag's help.
    help: str
    #: The names a key may take, from what the runner knows (`Limits.check_keys`).
    known: Callable[[KnownKeys], Collection[str]]
    #: Every key gets a counter (capped by ``max_parallel`` unless configured), whose
    #: effective cap rate limits shrink (at most one declaration adapts).
    adaptive: bool = False

    @property
    def flag(self) -> str:
        return "--" + self.setting.replace("_", "-")


def _models(metas: Sequence[BenchmarkTaskMetadata], eval_keys: Sequence[str]) -> list[str | None]:
    return [meta.model for meta in metas]


def _environments(
    metas: Sequence[BenchmarkTaskMetadata], eval_keys: Sequence[str]
) -> list[str | None]:
    return [meta.environment_id for meta in metas]


def _evaluation_keys(
    metas: Sequence[BenchmarkTaskMetadata], eval_keys: Sequence[str]
) -> list[str | None]:
    return list(eval_keys)


#: Every keyed limit, in the order limits are shown.
KEYED_LIMITS: tuple[KeyedLimit, ...] = (
    KeyedLimit(
        "max_parallel_by_model",
        LimitPhase.EXECUTION,
        _models,
        "by_model",
        "model",
        "model",
        "Executions on one model (default: only --max-parallel)",
        lambda known: known.models,
        adaptive=True,
    ),
    KeyedLimit(
        "max_parallel_by_environment",
        LimitPhase.EXECUTION,
        _environments,
        "by_environment",
        "environment",
        "environment id",
        "Executions in one environment (default: only --max-parallel)",
        lambda known: known.environment_ids,
    ),
    KeyedLimit(
        "max_parallel_evaluations_by_environment",
        LimitPhase.EVALUATION,
        _evaluation_keys,
        "evaluations_by_environment",
        "evaluations in",
        "environment name or id",
        "Evaluations in one environment (default: only --max-parallel-evaluations)",
        lambda known: known.evaluation_keys,
    ),
)


class KeyedCounter:
    """Admission's slots of one `KeyedLimit`: per limited key, the slots in use, the
    configured cap and the effective one (rate limits shrink an adaptive limit's)."""

    __slots__ = ("cap", "effective", "limit", "names", "of", "used")

    def __init__(
        self, limit: KeyedLimit, keys: list[str | None], caps: Mapping[str, int], default: int
    ) -> None:
        self.limit = limit
        if limit.adaptive:  # every key gets a counter, so a rate limit can shrink any
            caps = {**{k: default for k in keys if k is not None}, **caps}
        #: The limited keys, sorted; a key's counter is its position.
        self.names = sorted(caps)
        position = {name: i for i, name in enumerate(self.names)}
        #: Each task's counter (-1: its key is not limited; no key is, most often).
        self.of = (
            [-1 if k is None else position.get(k, -1) for k in keys]
            if position
            else [-1] * len(keys)
        )
        self.cap = [caps[name] for name in self.names]
        self.effective = list(self.cap) if limit.adaptive else self.cap
        self.used = [0] * len(self.names)
