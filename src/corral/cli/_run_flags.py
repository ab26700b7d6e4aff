"""The one table of ``corral run``'s settings flags: each row is a click option and
the `RunConfig` setting it gives, so the options and the config come from one place.

A flag not given sets nothing: the benchmark's ``run_defaults`` (a mapping of
`CorralRunner.run` keywords, or a `RunConfig`) decide, then `RunConfig`'s defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from .._errors import ConfigError
from .._run_config import RETRY_SETTINGS, SETTINGS, TIMEOUT_SETTINGS, RunConfig
from .._suggest import did_you_mean
from ..runtime._retry import RetryPolicy
from ..scheduler import KEYED_LIMITS, KeyedLimit, Limits
from ._options import k_values, keyed_limits

F = TypeVar("F", bound=Callable[..., Any])

#: The default limits and retry policy, for the flags' help.
LIMITS = Limits()
RETRY = RetryPolicy()
#: Keyed limits: a flag's NAME=N items are merged into the defaults' mapping.
KEYED = frozenset(limit.setting for limit in KEYED_LIMITS)


def _given(value: Any) -> Any:
    """A click value as a setting: None, an empty tuple or False is "not given"."""
    return value if value or value == 0 else None


@dataclass(frozen=True, slots=True)
class RunFlag:
    """One settings flag: click's declarations and keywords, and how its value
    (its click parameters' values) becomes the ``setting`` (None: not given)."""

    setting: str
    decls: tuple[str, ...]
    options: Mapping[str, Any]
    params: tuple[str, ...]
    read: Callable[..., Any] = _given
    #: Further options that feed the same setting (``--retry-errors`` with ``--rerun``).
    extra: tuple[tuple[tuple[str, ...], Mapping[str, Any]], ...] = field(default=())

    def decorate(self, command: F, help: str | None = None) -> F:
        for decls, options in reversed(((self.decls, self.options), *self.extra)):
            kwargs = dict(options)
            if help is not None and decls == self.decls:
                kwargs["help"] = help
            command = click.option(*decls, **kwargs)(command)
        return command


def _flag(
    flag: str, setting: str, help: str, *, param: str | None = None, **options: Any
) -> RunFlag:
    name = param or flag.lstrip("-").replace("-", "_")
    decls = (flag,) if param is None else (flag, param)
    read = options.pop("read", _given)
    return RunFlag(setting, decls, {"help": help, **options}, (name,), read)


def _keyed(limit: KeyedLimit) -> RunFlag:
    """The repeatable ``NAME=N`` flag of a keyed limit; its value arrives as a dict."""
    flag = limit.flag

    def parse(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Any:
        return keyed_limits(flag, values) if values else None

    help = f"{limit.help} (repeatable)."
    return _flag(flag, limit.setting, help, multiple=True, metavar="NAME=N", callback=parse)


def _k(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Any:
    return k_values(values)


def _names(values: tuple[str, ...]) -> tuple[str, ...] | None:
    names = tuple(n.strip() for value in values for n in value.split(","))
    if "" in names:
        raise ConfigError(f"--model: an empty model name in {', '.join(map(repr, values))}")
    return names or None


def _reruns(statuses: tuple[str, ...], retry_errors: bool) -> tuple[str, ...] | None:
    chosen = [*(("error", "timeout") if retry_errors else ()), *statuses]
    return tuple(dict.fromkeys(chosen)) or None


def _count_or_fraction(value: float | None) -> float | None:
    """``--fail-on-error 3`` is the count 3, not the float 3.0 (0 too: stop at the first
    error, as ``run(..., fail_on_error=0)``)."""
    return int(value) if value is not None and value.is_integer() else value


_RERUN_CHOICES = click.Choice(["error", "timeout", "max_iterations", "unreachable", "limit"])

#: Every settings flag of ``corral run``, in the order ``--help`` lists them.
RUN_FLAGS: tuple[RunFlag, ...] = (
    _flag("--task", "task_ids", "Run only this task (repeatable).", param="tasks", multiple=True),
    _flag(
        "--sample-id",
        "sample_ids",
        "Run only this sample (task id; repeatable).",
        param="sample_ids",
        multiple=True,
    ),
    _flag("--limit", "limit", "Run only the first N tasks (after --shuffle).", type=int),
    _flag("--shuffle", "shuffle", "Draw the tasks in a seeded order.", is_flag=True, default=None),
    _flag("--seed", "seed", "The seed of --shuffle (default 0): the same sample.", type=int),
    _flag("--trials", "trials_per_task", "Trials per task.", type=int),
    RunFlag(
        "k_values",
        ("-k", "--k", "ks"),
        {
            "multiple": True,
            "callback": _k,
            "metavar": "K[,K...]",
            "help": "k of pass@k (repeatable, or 1,2,4).",
        },
        ("ks",),
    ),
    _flag(
        "--max-parallel",
        "max_parallel",
        f"Running trial executions (default {LIMITS.max_parallel}).",
        type=int,
    ),
    _flag(
        "--max-parallel-per-task",
        "max_parallel_per_task",
        f"Running executions of one task (default {LIMITS.max_parallel_per_task}: a "
        "task's trials run one after another, each seeing the previous one's evaluation).",
        type=int,
    ),
    _flag(
        "--max-parallel-evaluations",
        "max_parallel_evaluations",
        "Running evaluations (default: --max-parallel).",
        type=int,
    ),
    _flag(
        "--max-parallel-total",
        "max_parallel_total",
        "Executions plus evaluations (default: --max-parallel + --max-parallel-evaluations).",
        type=int,
    ),
    *(_keyed(limit) for limit in KEYED_LIMITS),
    _flag(
        "--order",
        "order",
        "Which ready trial starts first (default: critical_path).",
        type=click.Choice(["critical_path", "fifo"]),
    ),
    _flag(
        "--no-dependencies",
        "include_dependencies",
        "Do not add the selected tasks' ancestors; refuse a selection missing one.",
        is_flag=True,
        read=lambda given: False if given else None,
    ),
    _flag(
        "--model",
        "models",
        "Run every task once on each model, side by side (repeatable, or a,b).",
        param="models",
        multiple=True,
        metavar="NAME[,NAME...]",
        read=_names,
    ),
    _flag(
        "--max-subprocesses",
        "max_subprocesses",
        "corral.subprocess calls at once (default: the CPUs this process may use).",
        type=int,
    ),
    RunFlag(
        "rerun",
        ("--rerun", "rerun"),
        {
            "multiple": True,
            "type": _RERUN_CHOICES,
            "help": "Give trials that ended with this status a fresh attempt (repeatable).",
        },
        ("rerun", "retry_errors"),
        _reruns,
        extra=(
            (
                ("--retry-errors",),
                {
                    "is_flag": True,
                    "help": "Give trials that ended error or timeout a fresh attempt "
                    "(the earlier one is kept).",
                },
            ),
        ),
    ),
    _flag(
        "--fail-on-error",
        "fail_on_error",
        "Stop starting trials once more than N (a count, or a fraction below 1 of the "
        "trials) errored or failed scoring; the benchmark stays resumable.",
        type=float,
        metavar="N",
        read=_count_or_fraction,
    ),
    _flag(
        "--token-limit",
        "token_limit",
        "Input + output tokens one trial may use (a task's own wins).",
        type=int,
    ),
    _flag(
        "--cost-limit", "cost_limit", "Cost one trial may spend (a task's own wins).", type=float
    ),
    _flag(
        "--working-time-limit",
        "working_time_limit",
        "Seconds one trial may spend working, not queued or backing off (a task's own wins).",
        type=float,
    ),
    _flag(
        "--run-cost-limit",
        "run_cost_limit",
        "Stop starting trials once the benchmark's recorded cost reaches this; run "
        "again with a higher one to continue.",
        type=float,
    ),
    _flag(
        "--max-retries",
        "max_retries",
        f"Extra attempts after an attempt raises (default {RETRY.max_retries}).",
        type=int,
    ),
    _flag(
        "--backoff-base",
        "backoff_base",
        f"Backoff before retry n: U(0, base*2**n) s (default {RETRY.backoff_base:g}).",
        type=float,
    ),
    _flag(
        "--backoff-cap",
        "backoff_cap",
        f"Longest backoff before a retry, in seconds (default {RETRY.backoff_cap:g}).",
        type=float,
    ),
    _flag(
        "--max-rate-limit-wait",
        "max_rate_limit_wait",
        f"Longest wait for one rate limit, in s (default {RETRY.max_rate_limit_wait:g}).",
        type=float,
    ),
    _flag(
        "--max-deferrals",
        "max_deferrals",
        f"Rate-limit waits of one trial before it ends error (default {RETRY.max_deferrals}).",
        type=int,
    ),
    _flag(
        "--trial-timeout",
        "trial_timeout",
        "Seconds for one attempt's execution (default: none).",
        type=float,
    ),
    _flag(
        "--evaluation-timeout",
        "evaluation_timeout",
        "Seconds for one call of evaluate (default: --trial-timeout).",
        type=float,
    ),
    _flag(
        "--max-value-bytes",
        "max_value_bytes",
        "Most bytes of JSON one recorded value may take; a larger one fails its "
        "attempt (default 4 MiB).",
        type=int,
    ),
    _flag(
        "--report-file",
        "report_file",
        "Also write the report as JSON here (default: reports/ID.json beside an SQLite store).",
        metavar="PATH",
        # Given, even empty: an empty path is refused (RunConfig), not the default.
        read=lambda given: given,
    ),
)
_BY_SETTING = {flag.setting: flag for flag in RUN_FLAGS}


def run_flags(*settings: str, help: Mapping[str, str] | None = None) -> Callable[[F], F]:
    """The click options of the rows for ``settings`` (default: every row), in table
    order; ``help`` replaces some rows' help text (``corral rescore``'s own)."""
    rows = [_BY_SETTING[s] for s in settings] if settings else list(RUN_FLAGS)

    def decorate(command: F) -> F:
        for row in reversed(rows):
            command = row.decorate(command, (help or {}).get(row.setting))
        return command

    return decorate


def flag_settings(params: dict[str, Any]) -> dict[str, Any]:
    """The settings that the flags in ``params`` (click's parameters of the rows a
    command has) give, taking those parameters out; a flag not given sets nothing."""
    out = {}
    for row in RUN_FLAGS:
        if row.params[0] in params:
            value = row.read(*(params.pop(name) for name in row.params))
            if value is not None:
                out[row.setting] = value
    return out


#: What ``run_defaults`` may hold besides settings: the run's metadata (`run_extras`).
EXTRAS = ("tags", "note", "source")


def run_extras(defaults: Mapping[str, Any] | RunConfig, flags: Mapping[str, Any]) -> dict[str, Any]:
    """The run's metadata (``tags``, ``note``): from a mapping ``defaults``, with the
    ``flags`` given (not None) over them."""
    out = {k: defaults[k] for k in EXTRAS if k in defaults} if isinstance(defaults, Mapping) else {}
    out.update({k: v for k, v in flags.items() if v is not None})
    return out


def run_config(defaults: Mapping[str, Any] | RunConfig, flags: Mapping[str, Any]) -> RunConfig:
    """``defaults`` (a benchmark's ``run_defaults``) with the ``flags`` given over them.
    Keyed limits merge, so ``--max-parallel-by-model a=1`` keeps the defaults' other
    models. The run's metadata in a mapping is `run_extras`'."""
    return _flags_agree(_merged(defaults, flags), flags)


def _flags_agree(config: RunConfig, flags: Mapping[str, Any]) -> RunConfig:
    """``config``, or a `ConfigError` in the flags' words for a flag that needs another
    one (the library's own says ``shuffle=True``, which no one typed at a shell)."""
    if "seed" in flags and not config.shuffle:
        raise ConfigError(f"--seed {flags['seed']} orders a shuffle: give --shuffle too")
    if "task_ids" in flags and "sample_ids" in flags:
        raise ConfigError("give --task or --sample-id, not both")
    return config


def _merged(defaults: Mapping[str, Any] | RunConfig, flags: Mapping[str, Any]) -> RunConfig:
    if isinstance(defaults, RunConfig):
        merged = {
            name: {**defaults.limits.caps[name], **value} if name in KEYED else value
            for name, value in flags.items()
        }
        return defaults.updated(**_ks_within(defaults.k_values, merged))
    defaults = {k: v for k, v in defaults.items() if k not in EXTRAS}
    flags = _ks_within(defaults.get("k_values"), flags)
    unknown = sorted(set(defaults) - set(SETTINGS))
    if unknown:
        # As `RunConfig.of` names a mistyped setting's close match (tags and note too).
        hint = did_you_mean(unknown[0], (*SETTINGS, *EXTRAS)) if len(unknown) == 1 else ""
        raise ConfigError(
            f"run_defaults has unknown key(s) {', '.join(map(repr, unknown))}; expected "
            "arguments of CorralRunner.run, max_retries or trial_timeout" + hint
        )
    settings = dict(defaults)
    for name, value in flags.items():
        if name in KEYED and isinstance(settings.get(name), Mapping):
            value = {**settings[name], **value}
        settings[name] = value
    return RunConfig.of(**settings)


def _ks_within(ks: object, flags: Mapping[str, Any]) -> Mapping[str, Any]:
    """``flags``, with the defaults' k values up to the trials ``--trials`` asks for
    when it gives no ``-k``: a benchmark's pass@10 is for its own 10 trials, and
    ``--trials 2`` then reports pass@1, rather than refusing k = 10. Only a k above the
    trials is dropped: one that is no k at all (a string, a bool) is left for
    `RunConfig` to refuse, naming it."""
    trials = flags.get("trials_per_task")
    if type(trials) is not int or "k_values" in flags:
        return flags
    if isinstance(ks, str | bytes) or not isinstance(ks, Sequence):
        return flags
    kept = [k for k in ks if not (type(k) is int and k > trials)]
    if len(kept) == len(ks):
        return flags
    return {**flags, "k_values": kept or [1]}


def runner_defaults(defaults: Mapping[str, Any] | RunConfig) -> RunConfig:
    """Only the retry policy and timeouts of ``defaults``: what ``corral rescore`` uses."""
    if isinstance(defaults, RunConfig):
        return RunConfig(retry=defaults.retry, timeouts=defaults.timeouts)
    kept = RETRY_SETTINGS | TIMEOUT_SETTINGS
    return RunConfig.of(**{k: v for k, v in defaults.items() if k in kept})
