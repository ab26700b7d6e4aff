"""The one encoder and decoder of commit payloads: typed payload <-> stored JSON object.

The stored format is fixed (stores written by every earlier Corral stay readable):
`encode` writes the keys earlier versions wrote, in their order; `decode` reads
what any of them wrote, a missing key as its default. Whether a stored payload is
well formed is checked once, where a store reads it (``store/_decode.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from .._types import UNCHANGED, Commit, TrialStatus
from ._kinds import CommitKind
from ._payloads import (
    _NO_STAMP,
    ActionPayload,
    EvaluationPayload,
    Payload,
    ReopenPayload,
    SetupPayload,
    Stamp,
    TerminalPayload,
    ToolEffectPayload,
)

#: The key of the errors of a trial's failed and retried attempts. Each attempt after
#: a failure carries every failed attempt so far on its first commit (and the terminal
#: carries them all), so a crash loses none and the latest list is the whole story; no
#: commit of their own, which would shift the step keys of later actions.
FAILED_ATTEMPTS = "failed_attempts"
_EMPTY: Mapping[str, Any] = {}


def encode(payload: Payload, stamp: Stamp | None = None) -> dict[str, Any]:
    """``payload`` as the JSON object a commit stores (``stamp`` in place of its own)."""
    out = _ENCODERS[type(payload)](payload)
    s = stamp if stamp is not None else getattr(payload, "stamp", None)
    if s is not None and s is not _NO_STAMP:
        if s.worked is not None:
            out["worked"] = s.worked
        if s.budget is not None:
            out["budget"] = s.budget
        if s.failed_attempts is not None:
            out[FAILED_ATTEMPTS] = list(s.failed_attempts)
    return out


def _setup(p: Any) -> dict[str, Any]:
    return {"state": p.state, "previous_trial": p.previous_trial}


def _action(p: Any) -> dict[str, Any]:
    return {
        "tool": p.tool,
        "arguments": p.arguments,
        "turn": p.turn,
        "index": p.index,
        "step_key": p.step_key,
    }


def _effect(p: Any) -> dict[str, Any]:
    out = {"action_seq": p.action_seq, "observation": p.observation}
    if p.state is not UNCHANGED:
        out["state"] = p.state
    return out


def _terminal(p: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "status": str(p.status),
        "output": p.output,
        "error": p.error,
        "attempts": p.attempts,
    }
    if p.state is not UNCHANGED:
        out["state"] = p.state
    if (
        p.error_type is None
        and p.traceback is None
        and p.limit is None
        and p.spent is None
        and p.limit_value is None
        and p.cause is None
    ):
        return out  # the common case: a trial that ended well (no pair built per field)
    extra = (
        ("error_type", p.error_type),
        ("traceback", p.traceback),
        ("limit", p.limit),
        ("spent", p.spent),
        ("limit_value", p.limit_value),
        ("cause", p.cause),
    )
    for name, value in extra:
        if value is not None:
            out[name] = value
    return out


def _evaluation(p: Any) -> dict[str, Any]:
    if p.passed is not None:
        out: dict[str, Any] = {"score": p.score, "passed": p.passed, "details": p.details}
        if p.scores:  # absent when there are none, as in histories written before
            out["scores"] = p.scores
    else:
        out = {"error": p.error, "error_type": p.error_type}
        if p.traceback is not None:
            out["traceback"] = p.traceback
        out["attempts"] = p.attempts
    if p.trial_status is not None:
        out["trial_status"] = p.trial_status
    return out


def _reopen(p: Any) -> dict[str, Any]:
    return {"reason": p.reason, "previous_status": p.previous_status}


_ENCODERS: Mapping[type, Callable[[Any], dict[str, Any]]] = {
    SetupPayload: _setup,
    ActionPayload: _action,
    ToolEffectPayload: _effect,
    TerminalPayload: _terminal,
    EvaluationPayload: _evaluation,
    ReopenPayload: _reopen,
}


def decode(commit: Commit) -> Payload:
    """The typed payload of ``commit`` (a kind's missing keys as their defaults)."""
    p = commit.payload if type(commit.payload) is dict else _EMPTY
    return _DECODERS[commit.kind](p)


def stamp_of(p: Mapping[str, Any]) -> Stamp:
    if "worked" not in p and "budget" not in p and FAILED_ATTEMPTS not in p:
        return _NO_STAMP
    return Stamp(p.get("worked"), p.get("budget"), _failed(p.get(FAILED_ATTEMPTS)))


def _failed(value: Any) -> tuple[Mapping[str, Any], ...] | None:
    """The well-formed entries of a stored list of failed attempts."""
    if not isinstance(value, list):
        return None
    return tuple(f for f in value if isinstance(f, dict) and f.get("error"))


def _decode_setup(p: Mapping[str, Any]) -> SetupPayload:
    return SetupPayload(p.get("state"), p.get("previous_trial"), stamp_of(p))


def _decode_action(p: Mapping[str, Any]) -> ActionPayload:
    return ActionPayload(
        p.get("tool"),
        p.get("arguments"),
        p.get("turn", 0),
        p.get("index", 0),
        p.get("step_key"),
        stamp_of(p),
    )


def _decode_effect(p: Mapping[str, Any]) -> ToolEffectPayload:
    return ToolEffectPayload(
        p.get("action_seq", 0), p.get("observation"), p.get("state", UNCHANGED), stamp_of(p)
    )


def decode_terminal(p: Mapping[str, Any]) -> TerminalPayload:
    """A terminal commit's stored object as its payload."""
    get = p.get
    return TerminalPayload(
        TrialStatus(p["status"]),
        get("output"),
        get("error"),
        get("attempts", 1),
        get("state", UNCHANGED),
        get("error_type"),
        get("traceback"),
        get("limit"),
        get("spent"),
        get("limit_value"),
        get("cause"),
        stamp_of(p),
    )


def _decode_evaluation(p: Mapping[str, Any]) -> EvaluationPayload:
    get = p.get
    passed = get("passed") if "passed" in p else None
    return EvaluationPayload(
        get("score"),
        passed,
        get("details"),
        get("error"),
        get("error_type"),
        get("traceback"),
        get("attempts"),
        get("trial_status"),
        get("scores"),
    )


def _decode_reopen(p: Mapping[str, Any]) -> ReopenPayload:
    return ReopenPayload(p.get("reason"), p.get("previous_status"))


_DECODERS: Mapping[str, Callable[[Mapping[str, Any]], Payload]] = {
    CommitKind.SETUP: _decode_setup,
    CommitKind.ACTION: _decode_action,
    CommitKind.TOOL_EFFECT: _decode_effect,
    CommitKind.TERMINAL: decode_terminal,
    CommitKind.EVALUATION: _decode_evaluation,
    CommitKind.REOPEN: _decode_reopen,
}


def terminal_of(commit: Commit) -> TerminalPayload:
    """A terminal commit's payload."""
    return decode_terminal(commit.payload if type(commit.payload) is dict else _EMPTY)


def evaluation_of(commit: Commit) -> EvaluationPayload:
    """An evaluation commit's payload."""
    return _decode_evaluation(commit.payload if type(commit.payload) is dict else _EMPTY)


def status_of(commit: Commit) -> str | None:
    """A terminal commit's stored status, without decoding the rest (what scans read)."""
    p = commit.payload
    return p.get("status") if type(p) is dict else None


def failed_attempts_of(commit: Commit) -> tuple[Mapping[str, Any], ...]:
    """The failed attempts one commit records (well-formed entries only)."""
    p = commit.payload
    if commit.kind == CommitKind.EVALUATION or type(p) is not dict:
        return ()
    return _failed(p.get(FAILED_ATTEMPTS)) or ()


def action_seq_of(commit: Commit) -> int | None:
    """A tool effect's action, if it names one (without decoding the rest)."""
    p = commit.payload
    seq = p.get("action_seq") if type(p) is dict else None
    return seq if type(seq) is int else None


def worked_of(commit: Commit) -> float | None:
    """The working time a commit recorded (seconds, as stored), if it did."""
    p = commit.payload
    return p.get("worked") if type(p) is dict else None
