"""One typed payload per commit kind: what each commit of a trial's history records.

A `Commit` keeps its payload as the stored JSON object (observers, ``corral show``
and the viewer see it as stored); these are what Corral reads from it and writes
into it, through `encode` and `decode` (``_codec``) only. Fields a writer leaves
out are None (``state`` absent is `UNCHANGED`). They are values, never changed once
built, yet not frozen dataclasses: one is built for every commit a trial writes, and a
frozen dataclass's ``__init__`` costs several times a plain one's.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from .._chat import ThinkingBlock, ToolCall, thinking_text
from .._json import recordable_text
from .._types import UNCHANGED, Evaluation, TrialStatus

_NO_DETAILS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CallCounts:
    """A trial's model calls to one model (the terminal's stamp keeps them per model, so
    a report reads them without reading the calls): how many succeeded, the tries that
    failed by kind (`FAILURE_KINDS`), the seconds waited after rate limits, the
    seconds the successful calls took, and how many of them recorded no latency (a
    mean latency is over the others: `timed`)."""

    calls: int = 0
    failed: Mapping[str, int] = field(default_factory=dict)
    rate_limit_wait: float = 0.0
    latency: float = 0.0
    untimed: int = 0

    def __add__(self, other: CallCounts) -> CallCounts:
        failed = dict(self.failed)
        for kind, n in other.failed.items():
            failed[kind] = failed.get(kind, 0) + n
        return CallCounts(
            self.calls + other.calls,
            failed,
            self.rate_limit_wait + other.rate_limit_wait,
            self.latency + other.latency,
            self.untimed + other.untimed,
        )

    @property
    def timed(self) -> int:
        """The successful calls that recorded their latency (``latency`` is theirs)."""
        return self.calls - self.untimed

    @property
    def failed_tries(self) -> int:
        return sum(self.failed.values())


#: The kinds of failed try: a rate limit (429, or a 503/529 saying how long to wait),
#: a 5xx, no answer in time, a connection refused or dropped, any other refusal.
FAILURE_KINDS = ("429", "5xx", "timeout", "dropped", "error")


class Stamp(NamedTuple):
    """What a trial's commit records beside its own value: the working time so far,
    the budgets that applied (setup and terminal) and the failed attempts' errors;
    a terminal, the trial's model calls counted per model."""

    worked: float | None = None
    budget: Mapping[str, Any] | None = None
    failed_attempts: tuple[Mapping[str, Any], ...] | None = None
    calls: Mapping[str, CallCounts] | None = None


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
    #: The model calls scoring made (a graded-by-model scorer's), each whole (no delta).
    model_calls: tuple[ModelCallPayload, ...] = ()
    #: The sequence number of the terminal it scores, when that is not the latest
    #: attempt's: a rescore of the earlier attempt a reopened trial is counted with
    #: until its new one ends (`TrialFold.standing`). None: the latest attempt's.
    terminal_seq: int | None = None

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


@dataclass(slots=True)
class UsagePayload:
    """What a cancelled trial held that no commit carried: its usage (the commit's own)
    and, in the stamp, its working time and failed attempts."""

    stamp: Stamp = _NO_STAMP


@dataclass(frozen=True, slots=True)
class FailedTry:
    """One try of a model call that failed: its kind (`FAILURE_KINDS`), the error, the
    HTTP status (when there was one), the wait the server told (``retry_after``), the
    wait taken before the next try (``waited``; None: there was none), and when."""

    kind: str
    error: str
    status: int | None = None
    retry_after: float | None = None
    waited: float | None = None
    at: float = 0.0


@dataclass(frozen=True, slots=True)
class ModelCallPayload:
    """One call a model client made for the trial.

    ``messages`` are what this call sent beyond the first ``keep`` messages of the
    trial's previous call (`CallChain` rebuilds each call's whole conversation);
    the reply is ``text``, ``reasoning``, ``tool_calls`` and ``finish_reason``;
    ``failed`` the tries before it that failed (``error`` set: the call failed for
    good, and has no reply). Strings longer than the recording cap end in
    `TRUNCATED` (``truncated`` counts them). ``thinking``: the reply's thinking
    blocks as the provider sent them, signatures included, kept whole (the
    provider refuses a changed one when the conversation goes back to it after a
    resume); ``reasoning`` is then their text. ``text_parts``: ``text`` split where
    the tool calls stand in it, when some of it follows a call (kept whole too: the
    next turn sends it back as the model wrote it). ``blocks``: the reply's content
    blocks whole, when it used a server tool (a web search: its query and results).
    """

    model: str | None = None
    endpoint: str | None = None
    keep: int = 0
    messages: tuple[Any, ...] = ()
    text: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    #: Seconds from sending the request to reading the reply (None: not measured).
    latency: float | None = None
    failed: tuple[FailedTry, ...] = ()
    error: str | None = None
    truncated: int = 0
    thinking: tuple[ThinkingBlock, ...] = ()
    text_parts: tuple[str, ...] = ()
    #: The reply's content blocks as the provider sent them, kept whole, when some are
    #: a server tool's (`ChatResponse.blocks`); else empty.
    blocks: tuple[Any, ...] = ()


Payload = (
    SetupPayload
    | ActionPayload
    | ToolEffectPayload
    | TerminalPayload
    | EvaluationPayload
    | ReopenPayload
    | ModelCallPayload
    | UsagePayload
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


#: What ends a recorded string cut at the recording cap (the count of characters
#: left out follows it): a reader sees at once that the value is not whole.
TRUNCATED = "[truncated by Corral:"
#: The default recording cap: the most characters of one recorded string.
DEFAULT_RECORD_CHARS = 32_768
_MAX_DEPTH = 64


def capped(value: Any, limit: int) -> tuple[Any, int]:
    """``value`` as JSON data with every string longer than ``limit`` characters cut,
    ending in `TRUNCATED`, and how many were cut (anything JSON has no value for is
    recorded as its ``repr``)."""
    cut = 0

    def walk(v: Any, depth: int) -> Any:
        nonlocal cut
        t = type(v)
        if t is str:
            # A reply may hold a lone surrogate (JSON's "\ud800"): kept as its escape,
            # since no store can write it.
            if len(v) <= limit:
                return recordable_text(v)
            cut += 1
            kept = recordable_text(v[:limit])
            return f"{kept}… {TRUNCATED} {len(v) - limit:,} more characters]"
        if v is None or t is bool or t is int:
            return v
        if t is float:
            return v if math.isfinite(v) else repr(v)
        if depth > _MAX_DEPTH:
            cut += 1
            return f"{TRUNCATED} nested too deeply]"
        if isinstance(v, Mapping):
            return {
                recordable_text(k if type(k) is str else str(k)): walk(x, depth + 1)
                for k, x in v.items()
            }
        if isinstance(v, list | tuple):
            return [walk(x, depth + 1) for x in v]
        return walk(repr(v), depth)

    return walk(value, 0), cut


def _recordable_block(block: ThinkingBlock) -> ThinkingBlock:
    """A thinking block whole, but for a lone surrogate, kept as its escape."""
    fields = (block.text, block.signature, block.data)
    clean = tuple(None if f is None else recordable_text(f) for f in fields)
    if clean == fields:
        return block
    return ThinkingBlock(clean[0] or "", clean[1], block.redacted, clean[2])


def model_call(
    keep: int,
    messages: Any,
    *,
    limit: int,
    model: str | None = None,
    endpoint: str | None = None,
    text: str | None = None,
    reasoning: str | None = None,
    tool_calls: tuple[ToolCall, ...] = (),
    finish_reason: str | None = None,
    usage: tuple[int, int, float, int, int] = (0, 0, 0.0, 0, 0),
    latency: float | None = None,
    failed: tuple[FailedTry, ...] = (),
    error: str | None = None,
    thinking: tuple[ThinkingBlock, ...] = (),
    text_parts: tuple[str, ...] = (),
    blocks: Sequence[Any] = (),
) -> ModelCallPayload:
    """A model call's payload, each recorded string capped at ``limit`` characters
    (``messages``: those sent beyond the previous call's first ``keep``; ``usage``:
    input, output tokens, cost, cache-read and cache-write tokens) but for the
    ``thinking`` blocks and the reply's content ``blocks``, kept whole (the next turn
    sends them back)."""
    sent, cut = capped(list(messages), limit)
    thinking = tuple(_recordable_block(b) for b in thinking)
    (finish_reason,), _ = capped([finish_reason], limit)
    values, more = capped(
        [None if tool_calls else text, None if thinking else reasoning, error], limit
    )
    cut += more
    if tool_calls and text is not None:
        # The text beside tool calls is kept whole, as thinking is: the conversation of
        # the next turn sends it back from here, and must send what the model wrote.
        values[0] = recordable_text(text)
    if thinking:
        values[1] = thinking_text(thinking)
    calls = []
    for call in tool_calls:
        fields, more = capped([call.id, call.name, call.arguments], limit)
        cut += more
        calls.append(ToolCall(*fields))
    tries = []
    for f in failed:
        (error_text,), more = capped([f.error], limit)
        cut += more
        tries.append(FailedTry(f.kind, error_text, f.status, f.retry_after, f.waited, f.at))
    fresh, out, cost, read, written = usage
    return ModelCallPayload(
        model,
        endpoint,
        keep,
        tuple(sent),
        values[0],
        values[1],
        tuple(calls),
        finish_reason,
        fresh,
        out,
        cost,
        read,
        written,
        latency,
        tuple(tries),
        values[2],
        cut,
        thinking,
        tuple(map(recordable_text, text_parts)) if tool_calls and text is not None else (),
        tuple(capped(list(blocks), sys.maxsize)[0]) if blocks else (),
    )
