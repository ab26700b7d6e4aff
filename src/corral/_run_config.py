"""`RunConfig`: every setting of one run as one frozen value.

Each part checks itself where it is built (`Limits`, `Budget`, `RetryPolicy`,
`Timeouts`, `StopRules`), and `RunConfig` checks what spans parts (k values
against the trials per task), so a bad value is a `ConfigError` naming it before
anything runs. ``RunConfig.of(**settings)`` builds one from the flat keywords of
`CorralRunner.run`; ``config.updated(**settings)`` composes keywords over it.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from ._budget import BUDGET_NAMES, NO_BUDGET, Budget, check_budget
from ._checks import flag, positive_int, seconds
from ._errors import ConfigError
from ._json import DEFAULT_MAX_VALUE_BYTES
from ._suggest import did_you_mean
from ._types import TrialStatus
from .report._files import check_report_file
from .runtime._retry import RetryPolicy
from .scheduler import KEYED_LIMITS, Limits
from .scheduler._limits import LIMIT_COUNTS
from .scheduler._plan import check_models
from .store._decode import MAX_TRIALS_PER_TASK

ORDERS = ("critical_path", "fifo")

#: Statuses ``rerun`` may name: a completed trial is never run again (that would
#: pick the best of several tries and bias pass@k).
RERUNNABLE = (
    TrialStatus.ERROR,
    TrialStatus.TIMEOUT,
    TrialStatus.MAX_ITERATIONS,
    TrialStatus.UNREACHABLE,
    TrialStatus.LIMIT,  # with a higher budget: the fresh attempt gets a fresh budget
)


def check_ks(k_values: object, trials: int) -> tuple[int, ...]:
    """The distinct k values of pass@k, sorted; each at most ``trials``."""
    if isinstance(k_values, str | bytes) or not isinstance(k_values, Sequence) or not k_values:
        raise ConfigError(f"k_values must be a non-empty sequence of integers, not {k_values!r}")
    ks = set()
    for k in k_values:
        positive_int(f"k_values entry {k!r}: k", k)
        if k > trials:
            raise ConfigError(f"k = {k} is larger than trials_per_task = {trials}")
        ks.add(k)
    return tuple(sorted(ks))


def rerun_statuses(rerun: object) -> frozenset[TrialStatus]:
    if isinstance(rerun, str) or not isinstance(rerun, Sequence | frozenset | set):
        raise ConfigError(f"rerun must be a sequence of trial statuses, not {rerun!r}")
    out = set()
    for status in rerun:
        if status not in RERUNNABLE:
            raise ConfigError(
                f"rerun names {status!r}; only {', '.join(map(str, RERUNNABLE))} trials "
                "can be given a fresh attempt"
            )
        out.add(TrialStatus(status))
    return frozenset(out)


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Seconds for one attempt's execution (``trial``) and one call of ``evaluate``
    (``evaluation``, default: ``trial``); None: no bound."""

    trial: float | None = None
    evaluation: float | None = None

    def __post_init__(self) -> None:
        seconds("trial_timeout", self.trial, or_none=True)
        seconds("evaluation_timeout", self.evaluation, or_none=True)

    @property
    def evaluation_or_trial(self) -> float | None:
        return self.trial if self.evaluation is None else self.evaluation


@dataclass(frozen=True, slots=True)
class StopRules:
    """When a run stops admitting trials: more errors than ``fail_on_error`` (a count,
    or a fraction below 1 of the run's trials), or the benchmark's recorded cost
    reaching ``run_cost_limit``."""

    fail_on_error: int | float | None = None
    run_cost_limit: float | None = None

    def __post_init__(self) -> None:
        value = self.fail_on_error
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(
                    f"fail_on_error must be a count or a fraction below 1, not {value!r}"
                )
            if _whole(value):
                if value < 0:
                    raise ConfigError(f"fail_on_error must be 0 or more, not {value!r}")
            elif not 0 < value < 1:
                raise ConfigError(
                    f"fail_on_error must be a whole count or a fraction between 0 and 1, "
                    f"not {value!r}"
                )
        check_budget("run_cost_limit", self.run_cost_limit)

    def error_budget(self, trials: int) -> int | None:
        """How many errors a run of ``trials`` trials may have before it stops admitting."""
        value = self.fail_on_error
        if value is None:
            return None
        return int(value) if _whole(value) else math.floor(value * trials)


def _whole(value: float) -> bool:
    return isinstance(value, int) or (math.isfinite(value) and value >= 1 and value.is_integer())


class RunSettings(TypedDict, total=False):
    """The flat keywords of `CorralRunner.run` (and ``run_defaults``), one per setting."""

    task_ids: Sequence[str] | None
    sample_ids: Sequence[str] | None
    limit: int | None
    shuffle: bool
    seed: int | None
    trials_per_task: int
    k_values: Sequence[int]
    include_dependencies: bool
    models: Sequence[str] | None
    order: str
    max_parallel: int
    max_parallel_per_task: int
    max_parallel_evaluations: int | None
    max_parallel_total: int | None
    max_parallel_by_model: Mapping[str, int] | None
    max_parallel_by_environment: Mapping[str, int] | None
    max_parallel_evaluations_by_environment: Mapping[str, int] | None
    token_limit: int | None
    cost_limit: float | None
    working_time_limit: float | None
    max_retries: int
    backoff_base: float
    backoff_cap: float
    no_retry: Sequence[type[BaseException]]
    max_rate_limit_wait: float
    max_deferrals: int
    trial_timeout: float | None
    evaluation_timeout: float | None
    rerun: Sequence[str]
    fail_on_error: float | None
    run_cost_limit: float | None
    max_subprocesses: int | None
    max_value_bytes: int
    report_file: str | os.PathLike[str] | None


#: Which part of a `RunConfig` each flat setting belongs to (None: a field of its own),
#: and its name there.
_PARTS: dict[str, tuple[str | None, str]] = {
    **{name: ("limits", name) for name in LIMIT_COUNTS},
    **{limit.setting: ("limits", limit.setting) for limit in KEYED_LIMITS},
    **{name: ("budget", name) for name in BUDGET_NAMES},
    **{
        name: ("retry", name)
        for name in (
            "max_retries",
            "backoff_base",
            "backoff_cap",
            "no_retry",
            "max_rate_limit_wait",
            "max_deferrals",
        )
    },
    "trial_timeout": ("timeouts", "trial"),
    "evaluation_timeout": ("timeouts", "evaluation"),
    "fail_on_error": ("stop", "fail_on_error"),
    "run_cost_limit": ("stop", "run_cost_limit"),
    **{
        name: (None, name)
        for name in (
            "task_ids",
            "sample_ids",
            "limit",
            "shuffle",
            "seed",
            "trials_per_task",
            "k_values",
            "include_dependencies",
            "models",
            "order",
            "rerun",
            "max_subprocesses",
            "max_value_bytes",
            "report_file",
        )
    },
}
#: Every flat setting, in `RunSettings` order (a keyed limit without a typed entry
#: there after the others).
SETTINGS: tuple[str, ...] = tuple(dict.fromkeys([*RunSettings.__annotations__, *_PARTS]))
RETRY_SETTINGS = frozenset(n for n, (part, _) in _PARTS.items() if part == "retry")
TIMEOUT_SETTINGS = frozenset(n for n, (part, _) in _PARTS.items() if part == "timeouts")


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Every setting of one run: what runs (``task_ids`` or ``sample_ids``, ``limit``,
    ``shuffle``, ``seed``, ``trials_per_task``,
    ``models``, ``include_dependencies``, ``order``), pass@k's ``k_values``, the
    concurrency `Limits`, the per-trial `Budget`, the `RetryPolicy` and `Timeouts`
    (None: the runner's), the statuses to ``rerun``, the `StopRules`, and the
    ``max_subprocesses``, ``max_value_bytes`` and ``report_file`` of `CorralRunner.run`.

    Frozen, and checked when built: a bad value is a `ConfigError` naming it.
    `RunConfig.of` builds one from `run`'s flat keywords; `updated` changes some.
    """

    task_ids: tuple[str, ...] | None = None
    #: Tasks by id like ``task_ids`` (not both); ``shuffle`` orders the candidates by
    #: ``seed`` before ``limit`` keeps the first N (the ids checked by `select_samples`).
    sample_ids: tuple[str, ...] | None = None
    limit: int | None = None
    shuffle: bool = False
    seed: int | None = None
    trials_per_task: int = 1
    k_values: tuple[int, ...] = (1,)
    include_dependencies: bool = True
    models: tuple[str, ...] | None = None
    order: str = "critical_path"
    limits: Limits = field(default_factory=Limits.resolve)
    budget: Budget = NO_BUDGET
    retry: RetryPolicy | None = None
    timeouts: Timeouts | None = None
    rerun: frozenset[TrialStatus] = frozenset()
    stop: StopRules = StopRules()
    max_subprocesses: int | None = None
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    report_file: Path | None = None

    def __post_init__(self) -> None:
        def put(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        if self.task_ids is not None:
            if isinstance(self.task_ids, str) or not isinstance(self.task_ids, Sequence):
                raise ConfigError(f"task_ids must be a sequence of task ids, not {self.task_ids!r}")
            put("task_ids", _ids("task_ids", self.task_ids))
        if isinstance(self.sample_ids, list | tuple):  # checked with the tasks (`select_samples`)
            put("sample_ids", _ids("sample_ids", self.sample_ids))
        trials = positive_int("trials_per_task", self.trials_per_task)
        if trials > MAX_TRIALS_PER_TASK:  # more than the store reads back
            raise ConfigError(
                f"trials_per_task must be at most {MAX_TRIALS_PER_TASK:,}, not {trials!r}"
            )
        put("k_values", check_ks(self.k_values, trials))
        flag("include_dependencies", self.include_dependencies)
        # Their types here, as every setting's (their pairing and the ids need the
        # tasks: `select_samples`): shuffle="no" is no config to hand around.
        flag("shuffle", self.shuffle)
        if self.seed is not None and (
            isinstance(self.seed, bool) or not isinstance(self.seed, int)
        ):
            raise ConfigError(f"seed must be an integer, not {self.seed!r}")
        if self.limit is not None:
            positive_int("limit", self.limit)
        if self.models is not None:
            put("models", check_models(self.models, None))
        if self.order not in ORDERS:
            raise ConfigError(f"order must be 'critical_path' or 'fifo', not {self.order!r}")
        for name, kind in (
            ("limits", Limits),
            ("budget", Budget),
            ("retry", RetryPolicy),
            ("timeouts", Timeouts),
            ("stop", StopRules),
        ):
            value = getattr(self, name)
            if not isinstance(value, kind) and not (value is None and name in _OPTIONAL):
                raise ConfigError(f"{name} must be a {kind.__name__}, not {value!r}")
        put("rerun", rerun_statuses(self.rerun))
        if self.max_subprocesses is not None:
            positive_int("max_subprocesses", self.max_subprocesses)
        positive_int("max_value_bytes", self.max_value_bytes)
        put("report_file", check_report_file(self.report_file))

    @classmethod
    def of(cls, **settings: Any) -> RunConfig:
        """A config from `CorralRunner.run`'s flat keywords (the defaults for the rest)."""
        return cls().updated(**settings)

    def updated(self, **settings: Any) -> RunConfig:
        """This config with the settings named by flat keywords changed.

        A keyword replaces that one setting (a keyed limit's whole mapping); the
        rest of its part stays. ``max_parallel_evaluations`` and
        ``max_parallel_total`` at their defaults (``max_parallel``, and the sum of
        both) follow the limits they default from. A retry or timeout keyword
        changes this config's `RetryPolicy` or `Timeouts`, or the defaults' when it
        has none. The result is checked as a whole (k values against the trials).
        """
        unknown = sorted(set(settings) - set(_PARTS))
        if unknown:
            hint = did_you_mean(unknown[0], SETTINGS) if len(unknown) == 1 else ""
            raise ConfigError(
                f"unknown run setting(s) {', '.join(map(repr, unknown))}; expected one of "
                + ", ".join(SETTINGS)
                + hint
            )
        parts: dict[str, dict[str, Any]] = {}
        own: dict[str, Any] = {}
        for name, value in settings.items():
            part, attr = _PARTS[name]
            if part is None:
                own[attr] = value
            else:
                parts.setdefault(part, {})[attr] = value
        changes: dict[str, Any] = dict(own)
        if "limits" in parts:
            changes["limits"] = Limits.resolve(
                **{**_limit_settings(self.limits), **parts["limits"]},
                declarations=self.limits.declarations,
            )
        if "budget" in parts:
            changes["budget"] = dataclasses.replace(self.budget, **parts["budget"])
        if "retry" in parts:
            base = self.retry if self.retry is not None else RetryPolicy()
            # RetryPolicy takes no_retry as the runner does (any collection, as a tuple).
            changes["retry"] = dataclasses.replace(base, **parts["retry"])
        if "timeouts" in parts:
            base_timeouts = self.timeouts if self.timeouts is not None else Timeouts()
            changes["timeouts"] = dataclasses.replace(base_timeouts, **parts["timeouts"])
        if "stop" in parts:
            changes["stop"] = dataclasses.replace(self.stop, **parts["stop"])
        return dataclasses.replace(self, **changes) if changes else self

    def settings(self) -> dict[str, Any]:
        """The flat keywords that build this config again with `RunConfig.of`
        (retry and timeouts only when set)."""
        out: dict[str, Any] = {
            name: getattr(self, attr) for name, (part, attr) in _PARTS.items() if part is None
        }
        out["rerun"] = tuple(sorted(self.rerun))
        out.update(_limit_settings(self.limits))
        out.update(self.budget.to_dict())
        out.update({k: v for k, v in dataclasses.asdict(self.stop).items() if v is not None})
        if self.timeouts is not None:
            out["trial_timeout"] = self.timeouts.trial
            out["evaluation_timeout"] = self.timeouts.evaluation
        if self.retry is not None:
            out.update({n: getattr(self.retry, n) for n in RETRY_SETTINGS})
        return out


_OPTIONAL = frozenset({"retry", "timeouts"})


def _limit_settings(limits: Limits) -> dict[str, Any]:
    """The keywords of `Limits.resolve` that give ``limits`` again, leaving out a
    defaulted limit (`Limits.follows`) so that it follows the limits it defaults from;
    one given stays, even equal to its default."""
    out = limits.to_dict()
    for name in limits.follows:
        del out[name]
    return out


def _ids(name: str, ids: Sequence[object]) -> tuple[str, ...]:
    """``ids`` as a tuple, each a task id (text: a list or number among them would
    reach the tasks' lookup as a TypeError, or as no task)."""
    for task_id in ids:
        if not isinstance(task_id, str):
            raise ConfigError(f"{name} must hold task ids (text), not {task_id!r}")
    return tuple(ids)  # type: ignore[arg-type]
