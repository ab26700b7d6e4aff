"""A trial's model calls on their way into its history: what the session records, and
the tries that failed before a call got its reply.

A call is not a commit of its own: its record waits here and is staged in the same
append as the trial's next commit (the turn's actions, a tool's effect, the
terminal), so the record and what followed from the reply land together or not at
all. A process killed before that append left no record, and the resumed trial
asks the model again: no call is ever recorded twice.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._chat import ThinkingBlock, ToolCall
from .._checks import positive_int
from .._errors import ModelError, ModelUnavailable, RateLimited
from .._json import MAX_DEPTH, PLAIN_MAPPINGS
from ..history import (
    DEFAULT_RECORD_CHARS,
    CallChain,
    FailedTry,
    ModelCallPayload,
    model_call,
)

if TYPE_CHECKING:
    from ..history import TrialFold


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call as its recorder gave it: the messages whole (the delta is taken when it
    is staged, in history order)."""

    messages: list[Any]
    model: str | None
    endpoint: str | None
    text: str | None
    reasoning: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    usage: tuple[int, int, float, int, int]
    latency: float | None
    failed: tuple[FailedTry, ...]
    error: str | None
    #: The most characters of one recorded string (`check_record_chars`).
    limit: int = DEFAULT_RECORD_CHARS
    thinking: tuple[ThinkingBlock, ...] = ()
    #: The text split at the tool calls (`ChatResponse.text_parts`).
    text_parts: tuple[str, ...] = ()
    #: The reply's blocks, when it used a server tool (`ChatResponse.blocks`).
    blocks: tuple[Any, ...] = ()


class CallLog:
    """A trial's calls not yet in a commit and its tries that failed since its last
    call: kept with the trial's job, so they outlive a failed attempt and a rate
    limit's deferral (and travel with the job to and from a Ray host)."""

    __slots__ = ("pending", "failed", "chain", "chain_at", "asked", "sent")

    def __init__(self) -> None:
        self.pending: list[PendingCall] = []
        self.failed: list[FailedTry] = []
        #: The previous call's messages, which the next call's are a delta on.
        self.chain: CallChain | None = None
        #: The sequence number of the call ``chain`` ends with (None: none).
        self.chain_at: int | None = None
        #: The model and endpoint the last failed try asked.
        self.asked: tuple[str | None, str | None] = (None, None)
        #: The messages the last failed try sent (a call that fails for good keeps
        #: them: a refused prompt is what its reader wants to see).
        self.sent: list[Any] = []

    def trying(self) -> None:
        """A try begins: the wait since the last failed one is the wait it took."""
        if self.failed and self.failed[-1].waited is None:
            last = self.failed[-1]
            waited = max(0.0, round(time.time() - last.at, 6))
            self.failed[-1] = FailedTry(
                last.kind, last.error, last.status, last.retry_after, waited, last.at
            )

    def fail(
        self,
        error: BaseException,
        model: str | None = None,
        endpoint: str | None = None,
        messages: Sequence[Any] = (),
    ) -> None:
        """A try of ``model`` at ``endpoint`` with ``messages`` failed with ``error`` (a
        model's error: others are not a try's)."""
        kind = failure_kind(error)
        if kind is None:
            return
        self.asked = (model, endpoint)
        self.sent = as_sent(messages)
        status = getattr(error, "status_code", None)  # a user's own error may have none
        told = error.retry_after if isinstance(error, RateLimited) else None
        if not (isinstance(told, int | float) and math.isfinite(told) and told >= 0):
            told = None  # a user's own RateLimited(retry_after=inf) must still be recorded
        text = f"{type(error).__name__}: {error}"
        self.failed.append(
            FailedTry(kind, text, status if type(status) is int else None, told, None, time.time())
        )

    def record(self, call: PendingCall) -> None:
        self.pending.append(call)

    def give_up(self) -> None:
        """The trial ends without another try: its failed tries become a call that
        failed for good (its error the last one's)."""
        if self.failed:
            last = self.failed[-1]
            failed, self.failed = tuple(self.failed), []
            sent, self.sent = self.sent, []
            self.pending.append(
                PendingCall(
                    sent,
                    *self.asked,
                    None,
                    None,
                    (),
                    None,
                    (0, 0, 0.0, 0, 0),
                    None,
                    failed,
                    last.error,
                )
            )

    def take(self, fold: TrialFold, history: Sequence[Any]) -> list[ModelCallPayload]:
        """The pending calls as payloads, each a delta on the one before it (``fold``
        and ``history``: the trial's, to which they are appended next)."""
        if not self.pending:
            return []
        chain = self.chain
        if chain is None or fold.last_call_seq != self.chain_at:
            # Not the chain this log last extended (a resume, or a lost append): the
            # store's history says what the previous call was.
            chain = self.chain = (
                CallChain.of(history) if fold.last_call_seq is not None else CallChain()
            )
        out = []
        for call in self.pending:
            keep, new = chain.delta(call.messages, call.limit)
            out.append(
                model_call(
                    keep,
                    new,
                    limit=call.limit,
                    model=call.model,
                    endpoint=call.endpoint,
                    text=call.text,
                    reasoning=call.reasoning,
                    tool_calls=call.tool_calls,
                    finish_reason=call.finish_reason,
                    usage=call.usage,
                    latency=call.latency,
                    failed=call.failed,
                    error=call.error,
                    thinking=call.thinking,
                    text_parts=call.text_parts,
                    blocks=call.blocks,
                )
            )
            # The chain holds what was recorded, not the agent's own messages: one it
            # changes in place before its next call is then no longer the same.
            chain.apply(out[-1])
        self.pending = []
        return out

    def staged(self, seq: int) -> None:
        """The last call taken was staged at ``seq``."""
        self.chain_at = seq


def copied(value: Any, room: int = MAX_DEPTH) -> Any:
    """``value`` with its mappings, lists and tuples copied, ``room`` levels deep (its
    scalars shared: they cannot change; a value nested deeper than any record or
    checked value goes is shared there): what an agent changes in place afterwards is
    not in the copy."""
    if room <= 0:
        return value
    if type(value) in PLAIN_MAPPINGS or isinstance(value, Mapping):
        return {k: copied(v, room - 1) for k, v in value.items()}
    if isinstance(value, list):
        return [copied(v, room - 1) for v in value]
    if isinstance(value, tuple):
        return tuple(copied(v, room - 1) for v in value)
    return value


def as_sent(messages: Sequence[Any]) -> list[Any]:
    """``messages`` as they are now (`copied`), so a message the agent changes in place
    before the call's record is staged (with the trial's next commit) is recorded as
    it was sent."""
    return [copied(m) for m in messages]


def failure_kind(error: BaseException) -> str | None:
    """What kind of failed try ``error`` is (`corral.history.FAILURE_KINDS`), or None
    when it is not a model's error."""
    if isinstance(error, RateLimited):
        return "429"
    if isinstance(error, ModelUnavailable):
        if error.failure_kind in ("timeout", "dropped"):
            return error.failure_kind
        status = error.status_code
        return "5xx" if status is not None and status >= 500 else "dropped"
    if isinstance(error, ModelError):
        return "error"
    return None


def check_record_chars(limit: object) -> int:
    return positive_int("record_chars", limit)
