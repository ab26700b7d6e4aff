"""The one encoder and decoder of commit payloads: typed payload <-> stored JSON object.

The stored format is fixed (stores written by every earlier Corral stay readable):
`encode` writes the keys earlier versions wrote, in their order; `decode` reads
what any of them wrote, a missing key as its default. Whether a stored payload is
well formed is checked once, where a store reads it (``store/_decode.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .._chat import THINKING_BLOCKS, ToolCall, thinking_blocks, thinking_text
from .._types import UNCHANGED, Commit, TrialStatus
from ._kinds import CommitKind
from ._payloads import (
    _NO_STAMP,
    ActionPayload,
    CallCounts,
    EvaluationPayload,
    FailedTry,
    ModelCallPayload,
    Payload,
    ReopenPayload,
    SetupPayload,
    Stamp,
    TerminalPayload,
    ToolEffectPayload,
    UsagePayload,
)

#: The key of the errors of a trial's failed and retried attempts. The first commit
#: after a failure (the failed attempt's model calls, written before the backoff, or the
#: next attempt's first commit) carries every failed attempt so far (and the terminal
#: carries them all), so the latest list is the whole story; no commit of their own,
#: which would shift the step keys of later actions. A crash before that commit loses
#: the errors it would have carried (a run cancelled lands them as it stops).
FAILED_ATTEMPTS = "failed_attempts"
#: The key of a terminal's model calls counted per model (`CallCounts`).
MODEL_CALLS = "model_calls"
_EMPTY: Mapping[str, Any] = {}
_T = TypeVar("_T")


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
        if s.calls:
            out[MODEL_CALLS] = {model: _counts(c) for model, c in s.calls.items()}
    return out


def encode_worked(payload: Payload, worked: float) -> dict[str, Any]:
    """``payload`` as `encode` stores it with ``Stamp(worked)``: the working time its
    only stamp, as on most of a trial's commits (no stamp built for each)."""
    out = _ENCODERS[type(payload)](payload)
    out["worked"] = worked
    return out


def _counts(c: CallCounts) -> dict[str, Any]:
    out: dict[str, Any] = {"calls": c.calls}
    if c.failed:
        out["failed"] = dict(c.failed)
    if c.rate_limit_wait:
        out["rate_limit_wait"] = round(c.rate_limit_wait, 6)
    if c.latency:
        out["latency"] = round(c.latency, 6)
    if c.untimed:  # absent: every call recorded its latency (as in older stores)
        out["untimed"] = c.untimed
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
        if p.model_calls:
            out["model_calls"] = [_model_call(c) for c in p.model_calls]
    else:
        out = {"error": p.error, "error_type": p.error_type}
        if p.traceback is not None:
            out["traceback"] = p.traceback
        out["attempts"] = p.attempts
    if p.trial_status is not None:
        out["trial_status"] = p.trial_status
    if p.terminal_seq is not None:  # absent for the latest attempt's, as before
        out[TERMINAL_SEQ] = p.terminal_seq
    return out


#: The key of an evaluation payload naming the terminal it scores (`EvaluationPayload`).
TERMINAL_SEQ = "terminal_seq"


def _reopen(p: Any) -> dict[str, Any]:
    return {"reason": p.reason, "previous_status": p.previous_status}


def _usage(p: Any) -> dict[str, Any]:
    return {}  # the stamp alone


def _model_call(p: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "model": p.model,
        "endpoint": p.endpoint,
        "keep": p.keep,
        "messages": list(p.messages),
        "text": p.text,
    }
    if p.thinking:  # the reasoning is their text: stored once
        out["thinking"] = [b.as_dict() for b in p.thinking]
    elif p.reasoning is not None:
        out["reasoning"] = p.reasoning
    if p.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in p.tool_calls
        ]
    if p.text_parts:  # absent when the text comes before every call, as before
        out["text_parts"] = list(p.text_parts)
    if p.blocks:  # only a reply that used a server tool has them
        out["blocks"] = list(p.blocks)
    if p.finish_reason is not None:
        out["finish_reason"] = p.finish_reason
    for name in ("input_tokens", "output_tokens", "cost", "cache_read_tokens"):
        value = getattr(p, name)
        if value:
            out[name] = value
    if p.cache_write_tokens:
        out["cache_write_tokens"] = p.cache_write_tokens
    if p.latency is not None:
        out["latency"] = round(p.latency, 6)
    if p.failed:
        out["failed"] = [_failed_try(f) for f in p.failed]
    if p.error is not None:
        out["error"] = p.error
    if p.truncated:
        out["truncated"] = p.truncated
    return out


def _failed_try(f: FailedTry) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": f.kind, "error": f.error, "at": f.at}
    for name in ("status", "retry_after", "waited"):
        value = getattr(f, name)
        if value is not None:
            out[name] = value
    return out


_ENCODERS: Mapping[type, Callable[[Any], dict[str, Any]]] = {
    SetupPayload: _setup,
    ActionPayload: _action,
    ToolEffectPayload: _effect,
    TerminalPayload: _terminal,
    EvaluationPayload: _evaluation,
    ReopenPayload: _reopen,
    ModelCallPayload: _model_call,
    UsagePayload: _usage,
}


def decode(commit: Commit) -> Payload:
    """The typed payload of ``commit`` (a kind's missing keys as their defaults)."""
    p = commit.payload if type(commit.payload) is dict else _EMPTY
    return _DECODERS[commit.kind](p)


def stamp_of(p: Mapping[str, Any]) -> Stamp:
    if "worked" not in p and "budget" not in p and FAILED_ATTEMPTS not in p:
        return _NO_STAMP
    return Stamp(
        p.get("worked"),
        p.get("budget"),
        _failed(p.get(FAILED_ATTEMPTS)),
        _calls(p.get(MODEL_CALLS)) if MODEL_CALLS in p else None,
    )


def _calls(value: Any) -> dict[str, CallCounts] | None:
    """A terminal's stored model-call counts (what is not well formed left out)."""
    if not isinstance(value, dict):
        return None
    out = {}
    for model, c in value.items():
        if not isinstance(c, dict):
            continue
        failed = c.get("failed")
        out[str(model)] = CallCounts(
            _int(c.get("calls")),
            {str(k): _int(n) for k, n in failed.items()} if isinstance(failed, dict) else {},
            _number(c.get("rate_limit_wait")),
            _number(c.get("latency")),
            _int(c.get("untimed")),
        )
    return out


#: Stored model-call counts read back (a trial head's copy of its terminal's).
calls_from_json = _calls


def calls_json(counts: Mapping[str, CallCounts]) -> dict[str, Any]:
    """``counts`` as JSON, exactly (`calls_from_json` gives them back equal)."""
    return {
        model: {
            "calls": c.calls,
            "failed": dict(c.failed),
            "rate_limit_wait": c.rate_limit_wait,
            "latency": c.latency,
            "untimed": c.untimed,
        }
        for model, c in counts.items()
    }


def _int(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0


def _number(value: Any) -> float:
    return float(value) if type(value) in (int, float) and value >= 0 else 0.0


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _texts(value: Any) -> tuple[str, ...]:
    """A stored list of strings (anything else: none)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return ()
    return tuple(value)


def _objects(value: Any) -> tuple[dict[str, Any], ...]:
    """A stored list of objects (anything else: none)."""
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        return ()
    return tuple(value)


def _positive(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) and value >= 0 else None


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


#: Each status by its stored value (an unknown one still raises, in `TrialStatus`).
_STATUSES: dict[object, TrialStatus] = {s.value: s for s in TrialStatus}


def decode_terminal(p: Mapping[str, Any]) -> TerminalPayload:
    """A terminal commit's stored object as its payload."""
    get = p.get
    status = p["status"]
    return TerminalPayload(
        (type(status) is str and _STATUSES.get(status)) or TrialStatus(status),
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
        _each(get("model_calls"), _decode_model_call),
        _int_or_none(get(TERMINAL_SEQ)),
    )


def _int_or_none(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _decode_reopen(p: Mapping[str, Any]) -> ReopenPayload:
    return ReopenPayload(p.get("reason"), p.get("previous_status"))


def _decode_usage(p: Mapping[str, Any]) -> UsagePayload:
    return UsagePayload(stamp_of(p))


def _decode_model_call(p: Mapping[str, Any]) -> ModelCallPayload:
    """A model call's stored object (each field checked: this kind's payload is not
    checked where a store reads it)."""
    get = p.get
    messages = get("messages")
    calls = get("tool_calls")
    failed = get("failed")
    thinking = thinking_blocks(get("thinking"))
    return ModelCallPayload(
        _text(get("model")),
        _text(get("endpoint")),
        _int(get("keep")),
        tuple(messages) if isinstance(messages, list) else (),
        _text(get("text")),
        _text(get("reasoning")) if not thinking else thinking_text(thinking),
        _each(calls, _tool_call),
        _text(get("finish_reason")),
        _int(get("input_tokens")),
        _int(get("output_tokens")),
        _number(get("cost")),
        _int(get("cache_read_tokens")),
        _int(get("cache_write_tokens")),
        _positive(get("latency")),
        _each(failed, _decode_failed_try),
        _text(get("error")),
        _int(get("truncated")),
        thinking,
        _texts(get("text_parts")),
        _objects(get("blocks")),
    )


def _each(value: Any, read: Callable[[Mapping[str, Any]], _T]) -> tuple[_T, ...]:
    """Each object of a stored list read (what is not an object left out)."""
    if not isinstance(value, list):
        return ()
    return tuple(read(item) for item in value if isinstance(item, dict))


def _tool_call(c: Mapping[str, Any]) -> ToolCall:
    return ToolCall(str(c.get("id") or ""), str(c.get("name") or ""), str(c.get("arguments") or ""))


def _decode_failed_try(f: Mapping[str, Any]) -> FailedTry:
    status = f.get("status")
    return FailedTry(
        str(f.get("kind") or "error"),
        str(f.get("error") or ""),
        status if type(status) is int else None,
        _positive(f.get("retry_after")),
        _positive(f.get("waited")),
        _number(f.get("at")),
    )


_DECODERS: Mapping[str, Callable[[Mapping[str, Any]], Payload]] = {
    CommitKind.SETUP: _decode_setup,
    CommitKind.ACTION: _decode_action,
    CommitKind.TOOL_EFFECT: _decode_effect,
    CommitKind.TERMINAL: decode_terminal,
    CommitKind.EVALUATION: _decode_evaluation,
    CommitKind.REOPEN: _decode_reopen,
    CommitKind.MODEL_CALL: _decode_model_call,
    CommitKind.USAGE: _decode_usage,
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


_STATUS_TEXT: dict[str, str] = {s.value: s.value for s in TrialStatus}


def ended_fields_of(commit: Commit) -> tuple[str, Any, Any, Any, Any, Any]:
    """A terminal's (status, error, attempts, limit, working time, model-call counts),
    read as `terminal_of` reads them (an unknown status raises as it does) without
    decoding the rest: what a trial head holds, made for every trial a batch ends."""
    p = commit.payload if type(commit.payload) is dict else _EMPTY
    raw = p["status"]
    status = (type(raw) is str and _STATUS_TEXT.get(raw)) or str(TrialStatus(raw))
    calls = model_calls_of(commit) if MODEL_CALLS in p else None
    return status, p.get("error"), p.get("attempts", 1), p.get("limit"), p.get("worked"), calls


def scored_fields_of(commit: Commit) -> tuple[Any, Any, Any, Any]:
    """An evaluation's (passed, score, named scores, error), as `evaluation_of` reads
    them; from the payload directly when it records no model calls (the only field
    whose decoding can fail)."""
    p = commit.payload
    if type(p) is dict and MODEL_CALLS not in p:
        return p.get("passed"), p.get("score"), p.get("scores"), p.get("error")
    scored = evaluation_of(commit)
    return scored.passed, scored.score, scored.scores, scored.error


def failed_attempts_of(commit: Commit) -> tuple[Mapping[str, Any], ...]:
    """The failed attempts one commit records (well-formed entries only)."""
    p = commit.payload
    if commit.kind == CommitKind.EVALUATION or type(p) is not dict:
        return ()
    return _failed(p.get(FAILED_ATTEMPTS)) or ()


def model_calls_of(commit: Commit) -> dict[str, CallCounts] | None:
    """A terminal's model calls counted per model (None: it counts none)."""
    p = commit.payload
    if type(p) is not dict or MODEL_CALLS not in p:
        return None
    return _calls(p[MODEL_CALLS])


def action_seq_of(commit: Commit) -> int | None:
    """A tool effect's action, if it names one (without decoding the rest)."""
    p = commit.payload
    seq = p.get("action_seq") if type(p) is dict else None
    return seq if type(seq) is int else None


def worked_of(commit: Commit) -> float | None:
    """The working time a commit recorded (seconds, as stored), if it did."""
    p = commit.payload
    return p.get("worked") if type(p) is dict else None


#: How a reader shows thinking the provider sent redacted (its data is opaque).
REDACTED = "[redacted thinking]"


def reply_parts(call: ModelCallPayload) -> tuple[str, ...] | None:
    """A reply's text split where its tool calls stand in it (the i-th part before call
    i, the last after them all), when some of it follows a call: a reader shows each
    call in its place. None: all of it is before them."""
    parts = call.text_parts
    return parts if parts and len(parts) == len(call.tool_calls) + 1 else None


def reply_pieces(call: ModelCallPayload) -> list[tuple[str, str, str]] | None:
    """A reply that used a server tool (its ``blocks``) as a reader shows it, in the
    order it was written: ``("text", "", text)``, ``("call", tool, arguments)`` for a
    call of the trial's tools, ``("server", what, gist)`` for a server tool's use or
    result (a web search's query, its results' titles and addresses). Its thinking is
    its reasoning, shown apart. None: it used none (`reply_parts` then says it)."""
    if not call.blocks:
        return None
    out: list[tuple[str, str, str]] = []
    calls = iter(call.tool_calls)
    for block in call.blocks:
        kind = block.get("type")
        if kind == "text":
            text = str(block.get("text") or "")
            if out and out[-1][0] == "text":
                out[-1] = ("text", "", out[-1][2] + text)
            else:
                out.append(("text", "", text))
        elif kind == "tool_use":
            made = next(calls, None)
            if made is not None:
                out.append(("call", made.name, made.arguments))
        elif kind not in _THINKING_KINDS:
            out.append(("server", *_gist_of(block)))
    return out


_THINKING_KINDS = frozenset({"thinking", "redacted_thinking"})


def _gist_of(block: Mapping[str, Any]) -> tuple[str, str]:
    """What a server tool's block says: its kind (and tool), and its input, or its
    results each as its title and address (opaque ``encrypted_*`` fields left out)."""
    kind = str(block.get("type"))
    if "name" in block and "input" in block:  # its use: web_search, code_execution, ...
        return f"{kind} {block['name']}", _shown(block["input"])
    content = block.get("content", {k: v for k, v in block.items() if k != "type"})
    if isinstance(content, list):
        return kind, "\n".join(map(_result_line, content)) or "(no results)"
    return kind, _result_line(content)


def _result_line(result: Any) -> str:
    if isinstance(result, Mapping) and isinstance(result.get("url"), str):
        title = result.get("title")
        return f"{title} <{result['url']}>" if isinstance(title, str) else result["url"]
    if isinstance(result, Mapping):
        result = {k: v for k, v in result.items() if not str(k).startswith("encrypted")}
    return _shown(result)


def reply_reasoning(call: ModelCallPayload) -> str | None:
    """A reply's reasoning as a reader shows it: its thinking blocks in order, a redacted
    one marked `REDACTED` (as a conversation's message shows it: its recorded
    ``reasoning`` leaves it out, having no text of it), else its ``reasoning``."""
    if not any(block.redacted for block in call.thinking):
        return call.reasoning
    return "\n\n".join(REDACTED if block.redacted else block.text for block in call.thinking)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """A recorded message as a reader shows it: its role, text, reasoning, tool calls,
    and for a tool's result the call it answers (``tool_call_id``) and the tool's name."""

    role: str
    text: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


def chat_message(raw: Any, names: dict[str, str] | None = None) -> ChatMessage:
    """A recorded message (OpenAI's shape, or Anthropic's content blocks) as a
    `ChatMessage`; ``names`` maps tool call ids to tool names (the calls seen are
    added, and a tool result takes its name from it)."""
    names = {} if names is None else names
    if not isinstance(raw, dict):
        return ChatMessage("unknown", _shown(raw))
    role = raw.get("role")
    texts: list[str] = []
    thoughts: list[str] = []
    calls: list[ToolCall] = []
    _parts(raw.get(THINKING_BLOCKS), [], thoughts, [])
    _parts(raw.get("content"), texts, thoughts, calls)
    for key in ("reasoning_content", "reasoning"):
        if isinstance(raw.get(key), str):
            thoughts.append(raw[key])
    listed = raw.get("tool_calls")
    for c in listed if isinstance(listed, list) else ():
        function = c.get("function") if isinstance(c, dict) else None
        if isinstance(function, dict):
            arguments = function.get("arguments")
            text = arguments if isinstance(arguments, str) else _shown(arguments)
            calls.append(ToolCall(str(c.get("id") or ""), str(function.get("name") or ""), text))
    for call in calls:
        names.setdefault(call.id, call.name)
    answers = raw.get("tool_call_id")
    answers = answers if isinstance(answers, str) else None
    name = raw.get("name")
    if not isinstance(name, str):
        name = names.get(answers) if answers is not None else None
    return ChatMessage(
        role if isinstance(role, str) else "unknown",
        "\n".join(texts),
        "\n\n".join(thoughts) if thoughts else None,
        tuple(calls),
        answers,
        name,
    )


def _parts(content: Any, texts: list[str], thoughts: list[str], calls: list[ToolCall]) -> None:
    if content is None:
        return
    if isinstance(content, str):
        texts.append(content)
        return
    if not isinstance(content, list):
        texts.append(_shown(content))
        return
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(part, str):
            texts.append(part)
        elif kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "thinking" and isinstance(part.get("thinking"), str):
            thoughts.append(part["thinking"])
        elif kind == "redacted_thinking":
            thoughts.append(REDACTED)
        elif kind == "tool_use" and isinstance(part, dict):
            called = str(part.get("id") or "")
            calls.append(ToolCall(called, str(part.get("name")), _shown(part.get("input"))))
        elif kind == "tool_result" and isinstance(part, dict):
            inner: list[str] = []
            _parts(part.get("content"), inner, thoughts, calls)
            texts.append(f"[result of {part.get('tool_use_id')}] " + "\n".join(inner))
        elif kind in ("image", "image_url"):
            texts.append("[image]")
        elif isinstance(part, dict) and kind is not None:  # a server tool's use or result
            what, gist = _gist_of(part)
            texts.append(f"[{what}] {gist}")
        else:
            texts.append(_shown(part))


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=repr)
