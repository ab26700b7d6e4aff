"""``corral show ID TASK TRIAL --transcript``: a trial's conversation with its models,
call by call (every value shown as text: nothing recorded is read as markup)."""

from __future__ import annotations

import dataclasses
from typing import Any

from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from .._costs import format_cost
from .._history import TrialHistory
from .._terminal import clean
from ..history import (
    ChatMessage,
    FailedTry,
    ModelCallPayload,
    TranscriptAttempt,
    TranscriptCall,
    reply_parts,
    reply_pieces,
    reply_reasoning,
    transcript,
)
from ..report._calls import FAILURE_NAMES
from ._history import _timestamp

#: Characters of reasoning shown before it is folded (``--json`` has it whole).
REASONING_SHOWN = 400
_ROLE_STYLES = {"system": "magenta", "user": "green", "assistant": "cyan", "tool": "yellow"}


def render_transcript(history: TrialHistory) -> RenderableType:
    entries = transcript(history.commits)
    parts: list[RenderableType] = []
    if any(isinstance(e, TranscriptAttempt) for e in entries):
        parts.append(Rule(Text("attempt 1"), align="left", style="bold"))
    number = 0
    attempt = 1
    judged: dict[int, int] = {}  # scorer calls so far, by the attempt they scored
    for entry in entries:
        if isinstance(entry, TranscriptAttempt):
            number = 0  # a reopened trial's conversation starts again
            attempt = entry.attempt
            parts.append(Rule(Text(attempt_heading(entry)), align="left", style="bold"))
            continue
        if entry.scorer:
            judged[entry.attempt] = judged.get(entry.attempt, 0) + 1
            heading = "scorer " + _heading(judged[entry.attempt], entry)
            if entry.attempt != attempt:
                # A rescore of an earlier attempt while the rerun after it is unfinished.
                heading = heading.replace(" · ", f" of attempt {entry.attempt} · ", 1)
        else:
            number += 1
            heading = _heading(number, entry)
        parts.append(Rule(Text(heading), align="left", style="dim"))
        parts.append(_messages(entry))
    if not any(isinstance(e, TranscriptCall) for e in entries):
        parts.append(
            Text(
                f"{history.task_id} #{history.trial}: no model calls recorded (an agent records "
                "them through session.chat(model) or session.record_model_call)"
            )
        )
    return Group(*parts)


def attempt_heading(entry: TranscriptAttempt) -> str:
    """Where a reopened trial's fresh transcript begins: ``attempt 2 (rerun at ...)``."""
    why = clean(entry.reason or "reopened")
    ended = entry.previous_status
    after = f", after an attempt that ended {clean(ended)}" if ended else ""
    return (
        f"attempt {entry.attempt} ({why} at {_timestamp(entry.created_at)}, seq {entry.seq}{after})"
    )


def transcript_dict(history: TrialHistory) -> list[dict[str, Any]]:
    """The transcript as JSON data (``--transcript --json``): each call, and where each
    reopened attempt begins (``"kind": "attempt"``)."""
    return [
        {"kind": "attempt" if isinstance(e, TranscriptAttempt) else "call", **dataclasses.asdict(e)}
        for e in transcript(history.commits)
    ]


def _heading(number: int, entry: TranscriptCall) -> str:
    call = entry.call
    parts = [f"call {number}", f"seq {entry.seq}", clean(call.model or "model ?")]
    if call.latency is not None:
        parts.append(f"{call.latency:.2f} s")
    if call.input_tokens or call.output_tokens:
        parts.append(f"{call.input_tokens:,}+{call.output_tokens:,} tok")
    if call.cache_read_tokens or call.cache_write_tokens:
        read, written = call.cache_read_tokens, call.cache_write_tokens
        parts.append(f"cache {read:,} read / {written:,} written")
    if call.cost:
        parts.append(format_cost(call.cost))
    if call.finish_reason:
        parts.append(clean(call.finish_reason))
    if call.truncated:
        parts.append(f"{call.truncated} value(s) truncated")
    return " · ".join(parts)


def _messages(entry: TranscriptCall) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for message in entry.sent:
        _message(grid, message)
    for failed in entry.call.failed:
        grid.add_row(Text("failed try", style="bold red"), Text(_failed(failed), style="red"))
    _reply(grid, entry.call)
    return grid


def _message(grid: Table, m: ChatMessage) -> None:
    role = m.role if m.role != "tool" else f"tool {m.name or m.tool_call_id or ''}".rstrip()
    style = _ROLE_STYLES.get(m.role, "white")
    if m.reasoning:
        grid.add_row(Text("  reasoning", style="dim"), _folded(m.reasoning))
    grid.add_row(Text(clean(role), style=f"bold {style}"), Text(clean(m.text)))
    for call in m.tool_calls:
        grid.add_row("", Text(f"→ {clean(call.name)}({clean(call.arguments)})", style=style))


def _reply(grid: Table, call: ModelCallPayload) -> None:
    if call.error is not None:
        grid.add_row(Text("gave up", style="bold red"), Text(clean(call.error), style="red"))
        return
    reasoning = reply_reasoning(call)
    if reasoning:
        grid.add_row(Text("reasoning", style="dim"), _folded(reasoning))
    pieces = reply_pieces(call)
    if pieces is not None:  # it used a server tool: each block in its place
        grid.add_row(Text("assistant", style="bold cyan"), "")
        for kind, name, text in pieces:
            if kind == "text":
                grid.add_row("", Text(clean(text)))
            elif kind == "call":
                grid.add_row("", Text(f"→ {clean(name)}({clean(text)})", style="cyan"))
            else:
                grid.add_row(Text(f"  {clean(name)}", style="magenta"), Text(clean(text)))
        return
    parts = reply_parts(call)
    if parts is None:  # all its text before its tool calls
        text = call.text or ("" if call.tool_calls else "(no text)")
        parts = (text, *([""] * len(call.tool_calls)))
    grid.add_row(Text("assistant", style="bold cyan"), Text(clean(parts[0])))
    for tool, after in zip(call.tool_calls, parts[1:], strict=True):
        grid.add_row("", Text(f"→ {clean(tool.name)}({clean(tool.arguments)})", style="cyan"))
        if after:  # what the reply wrote after this call, before the next
            grid.add_row("", Text(clean(after)))


def _folded(reasoning: str) -> Text:
    if len(reasoning) <= REASONING_SHOWN:
        return Text(clean(reasoning), style="dim italic")
    more = len(reasoning) - REASONING_SHOWN
    return Text(
        f"{clean(reasoning[:REASONING_SHOWN])}… ({more:,} more characters: --json)",
        style="dim italic",
    )


def _failed(f: FailedTry) -> str:
    parts = [FAILURE_NAMES.get(f.kind, clean(f.kind))]
    if f.status is not None:
        parts.append(f"HTTP {f.status}")
    if f.retry_after is not None:
        parts.append(f"told to wait {f.retry_after:g} s")
    if f.waited is not None:
        parts.append(f"waited {f.waited:.2f} s")
    return " · ".join(parts) + f": {clean(f.error)}"
