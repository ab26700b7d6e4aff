"""Stored rows as values: the one place every backend decodes (and checks) what it reads.

A store can be changed behind Corral's back (a hand edit, a stray script, a
bad copy). Whatever a reader gets past here has the types and bounds the rest
of Corral relies on; anything else is a `StoreCorrupt` naming the benchmark,
the trial and commit, and what is wrong, before any command uses it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import StoreCorrupt
from .._types import NO_USAGE, Commit, TrialKey, TrialStatus, Usage
from ..history import KINDS
from ._runs import RunRecord

#: More trials of one task than any benchmark runs: a stored count above it is damage
#: (a report walks every trial, so 10**12 would run for hours).
MAX_TRIALS_PER_TASK = 1_000_000
#: Timestamps from 1970 up to the end of year 9999 (what `datetime` can show).
LATEST = 253_402_300_800.0
_BIGINT = 1 << 63
_STATUSES = frozenset(str(s) for s in TrialStatus)


def _is_int(value: Any, low: int, high: int) -> bool:
    return type(value) is int and low <= value < high


def _is_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _is_time(value: Any) -> bool:
    return _is_number(value) and 0 <= value < LATEST


def check_created(where: str, benchmark_id: str, created_at: Any) -> None:
    """Raise `StoreCorrupt` unless a benchmark's creation time is a time."""
    if not _is_time(created_at):
        raise corrupt(where, benchmark_id, f"its creation time {created_at!r} is not a time")


def corrupt(where: str, benchmark_id: Any, what: str) -> StoreCorrupt:
    """The error for ``benchmark_id`` in the store ``where``, ``what`` saying what is wrong."""
    return StoreCorrupt(f"benchmark {benchmark_id!r} in {where} is corrupt: {what}")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Corral never writes NaN or Infinity (JSON has neither): one read back is damage.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def _json(text: Any) -> Any:
    """``text`` parsed, or a `ValueError` saying why not."""
    if not isinstance(text, str):
        raise ValueError(f"it is a {type(text).__name__}, not JSON text")
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise ValueError("it is nested too deeply") from None


def decode_run(where: str, benchmark_id: str, text: Any) -> RunRecord:
    """One stored run record (`RunRecord`), or `StoreCorrupt` saying what is wrong."""
    try:
        return RunRecord.from_dict(_json(text))
    except ValueError as exc:
        raise corrupt(where, benchmark_id, f"a run record: {exc}") from None


def decode_benchmark(
    where: str, benchmark_id: Any, config_text: Any, created_at: Any
) -> tuple[str, float, dict[str, Any]]:
    """A `benchmarks` row: (id, creation time, configuration), each checked."""
    if not isinstance(benchmark_id, str):
        raise corrupt(where, benchmark_id, "its id is not text")
    config = decode_config(where, benchmark_id, config_text)
    check_created(where, benchmark_id, created_at)
    return benchmark_id, float(created_at), config


def decode_config(where: str, benchmark_id: str, text: Any) -> dict[str, Any]:
    """A stored configuration: an object with ``trials_per_task`` and ``tasks`` that
    readers can use (each task an object naming its agent and environment)."""
    try:
        config = _json(text)
    except ValueError as exc:
        raise corrupt(where, benchmark_id, f"its configuration is not JSON ({exc})") from None
    if not isinstance(config, dict):
        raise corrupt(where, benchmark_id, "its configuration is not a JSON object")
    problem = config_problem(config)
    if problem is not None:
        raise corrupt(where, benchmark_id, f"its configuration's {problem}")
    return config


def config_problem(config: dict[str, Any]) -> str | None:
    if "trials_per_task" not in config:
        return "trials_per_task is missing"
    trials = config["trials_per_task"]
    if not _is_int(trials, 1, MAX_TRIALS_PER_TASK + 1):
        return f"trials_per_task is {_shown(trials)}, not an integer in 1..{MAX_TRIALS_PER_TASK:,}"
    tasks = config.get("tasks")
    if not isinstance(tasks, dict):
        return f"tasks is {_shown(tasks)}, not an object"
    for task_id, meta in tasks.items():
        problem = task_problem(task_id, meta)
        if problem is not None:
            return problem
    return None


def task_problem(task_id: str, meta: Any) -> str | None:
    """What is wrong with one task of a stored configuration, if anything."""
    if type(meta) is dict:
        # A task as Corral writes it, in one expression (a reader checks every task of
        # a configuration: 100,000 of them before a viewer's first page); the checks
        # one by one below only to say what is wrong.
        iterations = meta.get("max_iterations", 1)
        model = meta.get("model")
        dependencies = meta.get("dependencies", _NO_DEPENDENCIES)
        if (
            type(meta.get("environment_id")) is str
            and type(meta.get("agent_id", "")) is str
            and (model is None or type(model) is str)
            and type(iterations) is int
            and 1 <= iterations < _BIGINT
            and type(dependencies) is list
            and all(type(d) is str for d in dependencies)
        ):
            return None
    if not isinstance(meta, dict):
        return f"task {task_id!r} is {_shown(meta)}, not an object"
    if "environment_id" not in meta:  # a rescore needs it, and every run records it
        return f"task {task_id!r} has no environment_id"
    for name, ok, wanted in _TASK_FIELDS:
        if name in meta and not ok(meta[name]):
            return f"task {task_id!r} has {name} {_shown(meta[name])}, not {wanted}"
    return None


_NO_DEPENDENCIES: list[str] = []  # never changed: a default to read, not to fill
_TASK_FIELDS: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("agent_id", lambda v: isinstance(v, str), "text"),
    ("environment_id", lambda v: isinstance(v, str), "text"),
    ("model", lambda v: v is None or isinstance(v, str), "text or null"),
    ("max_iterations", lambda v: _is_int(v, 1, _BIGINT), "a positive integer"),
    (
        "dependencies",
        lambda v: isinstance(v, list) and all(isinstance(d, str) for d in v),
        "a list of task ids",
    ),
)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def decode_commit(
    where: str,
    benchmark_id: str,
    task_id: Any,
    trial: Any,
    row: Sequence[Any],
) -> Commit:
    """A `commits` row ``(seq, kind, payload, created_at, input_tokens, output_tokens,
    cost)`` of ``task_id``'s ``trial`` as a `Commit`; ``payload`` None (a scan that
    skipped it) stays None."""
    seq, kind, payload, created, tin, tout, cost = row
    # The common case in one expression (a scan decodes every commit of a run); the
    # checks one by one only to say what is wrong.
    fine = (
        type(task_id) is str
        and type(trial) is int
        and 0 <= trial < MAX_TRIALS_PER_TASK
        and type(seq) is int
        and 0 <= seq < _BIGINT
        and kind in KINDS
        and type(created) is float
        and 0.0 <= created < LATEST
        and type(tin) is int
        and 0 <= tin < _BIGINT
        and type(tout) is int
        and 0 <= tout < _BIGINT
        and type(cost) is float
        and 0.0 <= cost < math.inf
    )
    problem = None
    if not fine:
        if not isinstance(task_id, str):
            raise corrupt(where, benchmark_id, f"a commit's task id {task_id!r} is not text")
        if not _is_int(trial, 0, MAX_TRIALS_PER_TASK):
            what = f"task {task_id!r} has a trial numbered {_shown(trial)}"
            raise corrupt(where, benchmark_id, what)
        problem = _row_problem(seq, kind, created, tin, tout, cost)
    body = None
    if problem is None and payload is not None:
        try:
            body = _json(payload)
        except ValueError as exc:
            problem = f"its payload is not JSON ({exc})"
        else:
            glance = _FINE.get(kind)
            if glance is None or not glance(body):
                problem = _payload_problem(kind, body)
    if problem is not None:
        at = f"commit {seq}" if _is_int(seq, 0, _BIGINT) else "a commit"
        raise corrupt(where, benchmark_id, f"task {task_id!r} trial {trial} {at}: {problem}")
    usage = Usage(tin, tout, float(cost)) if tin or tout or cost else NO_USAGE
    return Commit(seq, kind, body, float(created), usage)


def missing_commit(
    where: str, benchmark_id: str, task_id: str, trial: int, missing: int, found: int
) -> StoreCorrupt:
    """The error for a trial whose commits skip sequence number ``missing`` (the next
    one stored is ``found``): every writer appends a trial's commits as 0, 1, 2...
    with no gap, so one is missing only if it was deleted behind Corral's back, and
    the history read around it was never recorded."""
    what = f"task {task_id!r} trial {trial} has no commit {missing}, though it has commit {found}"
    return corrupt(where, benchmark_id, what)


def check_unbroken(where: str, key: TrialKey, history: Sequence[Commit]) -> None:
    """Raise `missing_commit` unless ``history`` (``key``'s decoded commits in seq
    order, as a store's ``history`` reads them) is numbered 0, 1, 2... Its seqs are
    distinct and non-negative, so its last one says so at once."""
    if history and history[-1].seq != len(history) - 1:
        at = next(n for n, c in enumerate(history) if c.seq != n)
        raise missing_commit(where, key.benchmark_id, key.task_id, key.trial, at, history[at].seq)


def _row_problem(seq: Any, kind: Any, created: Any, tin: Any, tout: Any, cost: Any) -> str | None:
    if not _is_int(seq, 0, _BIGINT):
        return f"its sequence number {_shown(seq)} is not a non-negative integer"
    if kind not in KINDS:
        return f"its kind {_shown(kind)} is none of {', '.join(sorted(KINDS))}"
    if not _is_time(created):
        return f"its time {_shown(created)} is not a time"
    for name, value in (("input_tokens", tin), ("output_tokens", tout)):
        if not _is_int(value, 0, _BIGINT):
            return f"its {name} {_shown(value)} is not a non-negative integer"
    if not (_is_number(cost) and cost >= 0):
        return f"its cost {_shown(cost)} is not a non-negative number"
    return None


def _payload_problem(kind: str, payload: Any) -> str | None:
    if not isinstance(payload, dict):
        return f"its {kind} payload is {_shown(payload)}, not an object"
    worked = payload.get("worked", 0)
    if not (_is_number(worked) and worked >= 0):
        return f"its working time {_shown(worked)} is not a non-negative number"
    for name, ok, wanted in _PAYLOAD_FIELDS.get(kind, ()):
        value = payload.get(name, _ABSENT)
        if value is _ABSENT and name in _PAYLOAD_REQUIRED.get(kind, ()):
            return f"its {kind} payload has no {name}"
        if value is not _ABSENT and not ok(value):
            return f"its {kind} payload has {name} {_shown(value)}, not {wanted}"
    if kind == "evaluation" and "passed" in payload and "score" not in payload:
        return "its evaluation payload has no score"
    return None


_ABSENT = object()


def _text_or_null(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _is_status(value: Any) -> bool:
    """Whether ``value`` is a status (text first: a list or an object cannot be looked
    up in a set, and looking raises TypeError)."""
    return type(value) is str and value in _STATUSES


_COUNT = (lambda v: _is_int(v, 0, _BIGINT), "a non-negative integer")
# Only what a report needs is required: the store's contract lets a caller record
# other payloads under the other kinds (the runtime's `Projection` reads those).
_PAYLOAD_REQUIRED = {"terminal": ("status",)}
_PAYLOAD_FIELDS: Mapping[str, tuple[tuple[str, Callable[[Any], bool], str], ...]] = {
    "setup": (
        ("previous_trial", lambda v: v is None or _is_int(v, 0, _BIGINT), "a trial or null"),
    ),
    "action": (("turn", *_COUNT),),
    "tool_effect": (("action_seq", *_COUNT),),
    "terminal": (
        ("status", _is_status, f"one of {', '.join(sorted(_STATUSES))}"),
        ("attempts", *_COUNT),
        ("error", _text_or_null, "text or null"),
        ("traceback", _text_or_null, "text or null"),
        ("limit", _text_or_null, "text or null"),
    ),
    "evaluation": (
        ("passed", lambda v: isinstance(v, bool), "true or false"),
        ("score", _is_number, "a number"),
        ("details", lambda v: v is None or isinstance(v, dict), "an object"),
        ("scores", lambda v: v is None or _named_numbers(v), "an object of numbers"),
        ("attempts", *_COUNT),
    ),
}


def _named_numbers(v: Any) -> bool:
    return isinstance(v, dict) and all(
        isinstance(k, str) and _is_number(x) and not isinstance(x, bool) for k, x in v.items()
    )


def _terminal_fine(p: Any) -> bool:
    """The usual terminal payload, at a glance (what a scan reads for every trial)."""
    get = p.get if type(p) is dict else None
    if get is None:
        return False
    status, attempts, worked = get("status"), get("attempts", 0), get("worked", 0.0)
    return (
        type(status) is str
        and status in _STATUSES
        and type(attempts) is int
        and attempts >= 0
        and type(worked) is float
        and 0.0 <= worked < math.inf
        and _text_or_null(get("error"))
        and _text_or_null(get("traceback"))
        and _text_or_null(get("limit"))
    )


def _evaluation_fine(p: Any) -> bool:
    """The usual evaluation payload (a score), at a glance."""
    get = p.get if type(p) is dict else None
    if get is None:
        return False
    score, details = get("score"), get("details")
    return (
        type(get("passed")) is bool
        and _is_number(score)
        and (details is None or type(details) is dict)
        and "worked" not in p
        and "attempts" not in p
        and "scores" not in p
    )


#: Checks of the common payloads that let a scan skip the field-by-field ones.
_FINE: Mapping[str, Callable[[Any], bool]] = {
    "terminal": _terminal_fine,
    "evaluation": _evaluation_fine,
}
