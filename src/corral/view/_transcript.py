"""A trial's model calls as the trial page's chat shows them (data only: the page's
script puts every value in text nodes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._chat import ToolCall
from .._costs import format_cost
from .._types import Commit
from ..history import (
    ChatMessage,
    FailedTry,
    TranscriptAttempt,
    reply_parts,
    reply_pieces,
    reply_reasoning,
    transcript,
)
from ..report._calls import FAILURE_NAMES


def transcript_data(commits: Sequence[Commit]) -> list[dict[str, Any]]:
    """One entry per model call, in order: the messages it added to the conversation,
    its failed tries, its reply (or the error it gave up with), latency, tokens, cost;
    and where a reopened trial's fresh transcript begins (``"kind": "attempt"``)."""
    out: list[dict[str, Any]] = []
    for entry in transcript(commits):
        if isinstance(entry, TranscriptAttempt):
            out.append(
                {
                    "kind": "attempt",
                    "seq": entry.seq,
                    "created_at": entry.created_at,
                    "attempt": entry.attempt,
                    "reason": entry.reason,
                    "previous_status": entry.previous_status,
                }
            )
            continue
        call = entry.call
        reply = None
        if call.error is None:
            reply = {
                "text": call.text,
                "reasoning": reply_reasoning(call),
                "tool_calls": [_tool_call(t) for t in call.tool_calls],
                # Its text split where its tool calls stand (None: all before them).
                "text_parts": reply_parts(call),
                # A reply that used a server tool, in order (None: it used none).
                "pieces": _pieces(call),
                "finish_reason": call.finish_reason,
            }
        out.append(
            {
                "kind": "call",
                "scorer": entry.scorer,
                "seq": entry.seq,
                "created_at": entry.created_at,
                "attempt": entry.attempt,
                "model": call.model,
                "endpoint": call.endpoint,
                "latency": call.latency,
                "input_tokens": call.input_tokens,
                "output_tokens": call.output_tokens,
                "cache_read_tokens": call.cache_read_tokens,
                "cache_write_tokens": call.cache_write_tokens,
                "cost": call.cost,
                "cost_text": format_cost(call.cost),
                "truncated": call.truncated,
                "length": entry.length,
                "messages": [_message(m) for m in entry.sent],
                "failed": [_failed(f) for f in call.failed],
                "reply": reply,
                "error": call.error,
            }
        )
    return out


def _pieces(call: Any) -> list[dict[str, str]] | None:
    pieces = reply_pieces(call)
    if pieces is None:
        return None
    return [{"kind": kind, "name": name, "text": text} for kind, name, text in pieces]


def _message(m: ChatMessage) -> dict[str, Any]:
    return {
        "role": m.role,
        "text": m.text,
        "reasoning": m.reasoning,
        "tool_calls": [_tool_call(t) for t in m.tool_calls],
        "tool_call_id": m.tool_call_id,
        "name": m.name,
    }


def _tool_call(t: ToolCall) -> dict[str, str]:
    return {"id": t.id, "name": t.name, "arguments": t.arguments}


def _failed(f: FailedTry) -> dict[str, Any]:
    return {
        "kind": f.kind,
        "label": FAILURE_NAMES.get(f.kind, f.kind),
        "error": f.error,
        "status": f.status,
        "retry_after": f.retry_after,
        "waited": f.waited,
    }
