"""One typed payload per commit kind: what each commit of a trial's history records.

A `Commit` keeps its payload as the stored JSON object (observers, ``corral show``
and the viewer see it as stored); these are what Corral reads from it and writes
into it, through `encode` and `decode` (``_codec``) only. Fields a writer leaves
out are None (``state`` absent is `UNCHANGED`). They are values, never changed once
built, yet not frozen dataclasses: one is built for every commit a trial writes, and a
frozen dataclass's ``__init__`` costs several times a plain one's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NamedTuple

from .._types import UNCHANGED, Evaluation, TrialStatus

_NO_DETAILS: Mapping[str, Any] = MappingProxyType({})


class Stamp(NamedTuple):
    """What a trial's commit records beside its own value: the working time so far,
    the budgets that applied (setup and terminal) and the failed attempts' errors."""

    worked: float | None = None
    budget: Mapping[str, Any] | None = None
    failed_attempts: tuple[Mapping[str, Any], ...] | None = None


_NO_STAMP = Stamp()


@dataclass(slots=True)
class SetupPayload:
    """The environment's initial state, and the trial this one sees (reflective)."""

    state: Any = None
    previous_trial: int | None = None
    stamp: Stamp = _NO_STAMP


@dataclass(slots=True)
class ActionPayload:
    """One tool call the agent declared, ``index``-th of its turn ``turn``."""

    tool: Any = None
    arguments: Any = None
    turn: int = 0
    index: int = 0
    step_key: str | None = None
    stamp: Stamp = _NO_STAMP


@dataclass(slots=True)
class ToolEffectPayload:
    """The effect of executing the action committed at ``action_seq``."""

    action_seq: int = 0
    observation: Any = None
    state: Any = UNCHANGED
    stamp: Stamp = _NO_STAMP


@dataclass(slots=True)
class TerminalPayload:
    """How a trial's attempt ended (build one with `terminal`)."""

    status: TrialStatus
    output: Any = None
    error: str | None = None
    attempts: int = 1
    state: Any = UNCHANGED
    error_type: str | None = None
    traceback: str | None = None
    #: A per-trial budget exceeded: its name, what was spent, and its value.
    limit: str | None = None
    spent: float | None = None
    limit_value: float | None = None
    #: An unreachable trial's parent: ``{"task_id": ..., "status": ...}``.
    cause: Mapping[str, Any] | None = None
    stamp: Stamp = _NO_STAMP


@dataclass(slots=True)
class EvaluationPayload:
    """A score (``passed`` not None), or the failure to produce one (``error``)."""

    score: Any = None
    passed: bool | None = None
    details: Mapping[str, Any] | None = None
    error: str | None = None
    error_type: str | None = None
    traceback: str | None = None
    attempts: int | None = None
    #: ``"limit"`` when the trial scored ended over budget (scored, never a pass).
    trial_status: str | None = None
    #: Named scores (absent in histories written before them, and when there are none).
    scores: Mapping[str, float] | None = None

    @property
    def evaluation(self) -> Evaluation | None:
        """The `Evaluation` recorded, or None if scoring failed."""
        if self.passed is None:
            return None
        # Most scorers give no details: one shared empty mapping, not a dict per trial.
        return Evaluation(
            self.score, self.passed, self.details or _NO_DETAILS, self.scores or _NO_DETAILS
        )


@dataclass(slots=True)
class ReopenPayload:
    """Why a finished trial got a fresh attempt, and how the earlier one ended."""

    reason: str | None = None
    previous_status: str | None = None


Payload = (
    SetupPayload
    | ActionPayload
    | ToolEffectPayload
    | TerminalPayload
    | EvaluationPayload
    | ReopenPayload
)


def terminal(
    status: TrialStatus,
    *,
    attempts: int,
    state: Any = None,
    output: Any = None,
    failure: Mapping[str, Any] | None = None,
    cause: Mapping[str, Any] | None = None,
) -> TerminalPayload:
    """The terminal payload of an attempt that ended ``status``: every writer builds
    it here. ``failure``: the error's fields (``error``, ``error_type``,
    ``traceback``; a budget's ``limit``, ``spent``, ``limit_value``)."""
    if not failure:  # the common case, without a look-up per field
        return TerminalPayload(status, output, None, attempts, state, cause=cause)
    f = failure
    return TerminalPayload(
        status,
        output,
        f.get("error"),
        attempts,
        state,
        f.get("error_type"),
        f.get("traceback"),
        f.get("limit"),
        f.get("spent"),
        f.get("limit_value"),
        cause,
    )


def reopen(previous_status: TrialStatus) -> ReopenPayload:
    """The marker of a trial given a fresh attempt by ``run(..., rerun=...)``."""
    return ReopenPayload("rerun", str(previous_status))


def evaluation_failed(failure: Mapping[str, Any], *, attempts: int) -> EvaluationPayload:
    """The evaluation payload of a scorer that failed ``attempts`` times (``failure``:
    the error's ``error``, ``error_type`` and ``traceback``)."""
    return EvaluationPayload(
        error=failure.get("error"),
        error_type=failure.get("error_type"),
        traceback=failure.get("traceback"),
        attempts=attempts,
    )
