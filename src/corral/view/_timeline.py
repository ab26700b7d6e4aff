"""A trial's commits as the trial page shows them: attempts, gaps, and state diffs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import history
from .._turns import declared_order
from .._types import UNCHANGED, Commit
from ..history import ModelCallPayload, SetupPayload, ToolEffectPayload
from ._assets import to_json

#: Changes of one state diff listed before the rest is summed up as a count.
MAX_CHANGES = 200
#: Characters of a failed model call's error the timeline shows (the transcript has it).
ERROR_SHOWN = 300
#: Tool names of one model call's reply the timeline lists.
NAMES_SHOWN = 8


def timeline(commits: Sequence[Commit]) -> list[dict[str, Any]]:
    """One entry per commit, in commit order: its payload, the attempt it belongs to, the
    seconds since the trial's first commit and since the commit before, and how it
    changed the state (`state_changes`). A model call's payload is its summary
    (`call_summary`, ``"compact": true``): the transcript shows its messages, and the
    stored payload is one fetch away (``/api/commit``), not in every page and export."""
    out: list[dict[str, Any]] = []
    start = commits[0].created_at if commits else 0.0
    previous_at = start
    attempt = 1
    changes = state_changes(commits)
    for c in commits:
        if c.kind == "reopen":
            attempt += 1
        entry: dict[str, Any] = {
            "seq": c.seq,
            "kind": c.kind,
            "created_at": c.created_at,
            "since_start": c.created_at - start,
            "gap": c.created_at - previous_at,
            "attempt": attempt,
            "usage": c.usage.to_dict() if c.usage else None,
            "payload": c.payload,
        }
        if c.kind == "model_call":
            entry["payload"] = call_summary(c)
            entry["compact"] = True
        previous_at = c.created_at
        if c.seq in changes:
            found = diff(*changes[c.seq])
            entry["diff"] = found[:MAX_CHANGES]
            entry["diff_more"] = max(0, len(found) - MAX_CHANGES)
        out.append(entry)
    return out


def call_summary(commit: Commit) -> dict[str, Any]:
    """What the timeline shows of a model call: model, latency, tokens, cost, how many
    messages it added and tool calls it made, its failed tries, the error it gave up
    with (cut at `ERROR_SHOWN`)."""
    call = history.decode(commit)
    assert isinstance(call, ModelCallPayload)
    error = call.error
    if error is not None and len(error) > ERROR_SHOWN:
        error = error[:ERROR_SHOWN] + f"… ({len(error) - ERROR_SHOWN:,} more characters)"
    return {
        "model": call.model,
        "endpoint": call.endpoint,
        "latency": call.latency,
        "input_tokens": call.input_tokens,
        "output_tokens": call.output_tokens,
        "cost": call.cost,
        "messages": len(call.messages),
        "tool_calls": len(call.tool_calls),
        "tools": [t.name for t in call.tool_calls[:NAMES_SHOWN]],
        "failed": len(call.failed),
        "finish_reason": call.finish_reason,
        "error": error,
        "bytes": len(to_json(commit.payload)),
    }


def state_changes(commits: Sequence[Commit]) -> dict[int, tuple[Any, Any]]:
    """The state before and after each tool effect that set one, by the effect's seq;
    a turn's effects apply in the order its actions were declared, not the order they
    landed in (`declared_order`)."""
    out: dict[int, tuple[Any, Any]] = {}
    state: Any = None
    for c in declared_order(commits):
        if isinstance(c.payload, dict) and c.kind in _STATEFUL:
            p = history.decode(c)
            assert isinstance(p, SetupPayload | ToolEffectPayload)
            if p.state is UNCHANGED:
                continue
            if isinstance(p, ToolEffectPayload):
                out[c.seq] = (state, p.state)
            state = p.state
    return out


_STATEFUL = frozenset({"setup", "tool_effect"})


def diff(before: Any, after: Any, path: str = "") -> list[dict[str, Any]]:
    """The changes from ``before`` to ``after`` (JSON values), by path (``a.b[2]``)."""
    if before == after and type(before) is type(after):
        return []
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in before:
            sub = f"{path}.{key}" if path else str(key)
            if key not in after:
                out.append({"path": sub, "op": "removed", "before": before[key]})
            else:
                out += diff(before[key], after[key], sub)
        for key in after:
            if key not in before:
                sub = f"{path}.{key}" if path else str(key)
                out.append({"path": sub, "op": "added", "after": after[key]})
        return out
    if isinstance(before, list) and isinstance(after, list):
        out = []
        for i in range(max(len(before), len(after))):
            sub = f"{path}[{i}]"
            if i >= len(after):
                out.append({"path": sub, "op": "removed", "before": before[i]})
            elif i >= len(before):
                out.append({"path": sub, "op": "added", "after": after[i]})
            else:
                out += diff(before[i], after[i], sub)
        return out
    return [{"path": path or "(state)", "op": "changed", "before": before, "after": after}]
