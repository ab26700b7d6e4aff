"""Corral's OpenAI-style chat turns as Anthropic Messages API requests, and its
replies as `ChatResponse` (no HTTP here).

System messages become the top-level ``system``; an assistant's ``tool_calls``
become ``tool_use`` blocks and each ``tool`` message a ``tool_result`` block of
the user turn after it; consecutive turns of one role are joined (the API wants
them alternating), and a turn with no content (its text empty or blank) is left
out. A content list is passed on as blocks, so an assistant message as Anthropic
sent it (`ChatResponse.message`, thinking blocks and
signatures included) goes back unchanged, and so do the thinking blocks an
assistant turn carries under `THINKING_BLOCKS` (first in its content, as the API
wants them when thinking is on and the turn used tools) and the blocks of a reply
that used a server tool (a web search) under `CONTENT_BLOCKS`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from .._chat import (
    CONTENT_BLOCKS,
    TEXT_PARTS,
    THINKING_BLOCKS,
    ChatResponse,
    ThinkingBlock,
    ToolCall,
    _count,
    _shown,
    thinking_text,
)
from .._errors import ConfigError
from .._types import Usage

#: Where the arguments of a call the API cannot take (not a JSON object) are kept.
RAW_ARGUMENTS = "arguments"
#: Cache prices from the input price when not given: Anthropic's multipliers
#: (a read costs a tenth of an input token, a 5-minute write a quarter more, a
#: write that lives an hour twice as much).
CACHE_READ_FACTOR = 0.1
CACHE_WRITE_FACTOR = 1.25
CACHE_WRITE_1H_FACTOR = 2.0


def convert_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """The ``system`` field (None if there is none) and the ``messages`` list."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ConfigError(f"messages[{index}] must be a mapping, not {_shown(message)}")
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            system.extend(_blocks(content, index))
        elif role == "user":
            _join(turns, "user", _blocks(content, index))
        elif role == "assistant":
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                raise ConfigError(f"messages[{index}].tool_calls must be a list")
            served = _served(message, calls, index)
            if served is not None:
                _join(turns, "assistant", served)
                continue
            blocks = _said(message, calls, index)
            _join(turns, "assistant", _thinking(message, blocks, index) + blocks)
        elif role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id") or ""),
                "content": content if isinstance(content, str) else _blocks(content, index),
            }
            _join(turns, "user", [result])
        else:
            raise ConfigError(f"messages[{index}] has role {role!r}; the Messages API has no such")
    if not system:
        return None, turns
    if all(set(block) == {"type", "text"} for block in system):
        return "\n\n".join(block["text"] for block in system), turns
    return system, turns


def _join(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:  # a turn that says nothing (its text empty or blank): the API refuses it
        return
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})


def _blocks(content: object, index: int) -> list[dict[str, Any]]:
    """A message's content as content blocks (text that is empty or only whitespace
    is left out: the API refuses such a text block)."""
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content.strip() else []
    if not isinstance(content, list):
        raise ConfigError(
            f"messages[{index}].content must be a string or a list, not {_shown(content)}"
        )
    blocks = []
    for part in content:
        if isinstance(part, str):
            part = {"type": "text", "text": part}
        if not isinstance(part, Mapping):
            raise ConfigError(f"messages[{index}] has a part that is not a mapping: {part!r}")
        if part.get("type") == "image_url":
            blocks.append(_image(part.get("image_url")))
        elif part.get("type") != "text" or str(part.get("text") or "").strip():
            blocks.append(dict(part))  # Anthropic's own blocks, as they are
    return blocks


def _said(message: Mapping[str, Any], calls: list[Any], index: int) -> list[dict[str, Any]]:
    """An assistant turn's text and tool uses, its text where `TEXT_PARTS` puts it
    among the calls when they are its content (else its content, then the calls)."""
    content = message.get("content")
    parts = message.get(TEXT_PARTS)
    if parts is None:
        return _blocks(content, index) + [_tool_use(c) for c in calls]
    if not isinstance(parts, list | tuple) or not all(isinstance(p, str) for p in parts):
        raise ConfigError(f"messages[{index}].{TEXT_PARTS} must be a list of strings")
    if len(parts) != len(calls) + 1 or "".join(parts) != (content or ""):
        # Not the reply's own text (the agent changed it, or its calls): as written.
        return _blocks(content, index) + [_tool_use(c) for c in calls]
    blocks = []
    for part, call in zip(parts, calls, strict=False):
        blocks += _blocks(part, index) + [_tool_use(call)]
    return blocks + _blocks(parts[-1], index)


def _served(
    message: Mapping[str, Any], calls: list[Any], index: int
) -> list[dict[str, Any]] | None:
    """An assistant turn as the reply's own blocks (`CONTENT_BLOCKS`: its server tools'
    uses and results among its text, thinking and tool uses), while its text and tool
    calls are still theirs; None if it carries none, or the agent changed them."""
    raw = message.get(CONTENT_BLOCKS)
    if raw is None:
        return None
    if not isinstance(raw, list | tuple) or not all(isinstance(b, Mapping) for b in raw):
        raise ConfigError(f"messages[{index}].{CONTENT_BLOCKS} must be a list of blocks")
    text = "".join(str(b.get("text") or "") for b in raw if b.get("type") == "text")
    uses = [_use(b) for b in raw if b.get("type") == "tool_use"]
    if text != (message.get("content") or "") or uses != [_use(_tool_use(c)) for c in calls]:
        return None
    return [dict(b) for b in raw]


def _use(block: Mapping[str, Any]) -> tuple[Any, ...]:
    return block.get("id"), block.get("name"), block.get("input")


def _thinking(
    message: Mapping[str, Any], blocks: list[dict[str, Any]], index: int
) -> list[dict[str, Any]]:
    """The thinking blocks an assistant turn carries, unless its content has its own."""
    raw = message.get(THINKING_BLOCKS)
    if raw is None or any(b.get("type") in _THINKING_TYPES for b in blocks):
        return []
    if not isinstance(raw, list) or not all(isinstance(b, Mapping) for b in raw):
        raise ConfigError(f"messages[{index}].{THINKING_BLOCKS} must be a list of blocks")
    return [dict(b) for b in raw]


_THINKING_TYPES = ("thinking", "redacted_thinking")


def _image(image_url: object) -> dict[str, Any]:
    url = image_url.get("url") if isinstance(image_url, Mapping) else image_url
    if not isinstance(url, str):
        raise ConfigError(f"an image_url part without a url: {_shown(image_url)}")
    if url.startswith("data:") and ";base64," in url:
        media_type, data = url[5:].split(";base64,", 1)
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": media_type, "data": data},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def _tool_use(call: object) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(call, Mapping) or not isinstance(function, Mapping):
        raise ConfigError(f"a tool call without a function: {_shown(call)}")
    text = function.get("arguments")
    try:
        arguments = json.loads(text) if isinstance(text, str) and text.strip() else {}
    except ValueError:
        arguments = None
    if isinstance(text, Mapping):
        arguments = dict(text)
    if not isinstance(arguments, dict):  # input must be an object: keep what was written
        arguments = {RAW_ARGUMENTS: text}
    return {
        "type": "tool_use",
        "id": str(call.get("id") or ""),
        "name": str(function.get("name") or ""),
        "input": arguments,
    }


def convert_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI function tools (`corral.Tool.to_openai`) as Anthropic tools; a tool
    already in Anthropic's shape (or a server tool) is passed on as it is."""
    out = []
    for tool in tools:
        function = tool.get("function")
        if tool.get("type") != "function" or not isinstance(function, Mapping):
            out.append(dict(tool))
            continue
        spec: dict[str, Any] = {"name": function.get("name")}
        if function.get("description"):
            spec["description"] = function["description"]
        spec["input_schema"] = function.get("parameters") or {"type": "object", "properties": {}}
        out.append(spec)
    return out


def cache_prices(prices: Mapping[str, float] | None) -> dict[str, float] | None:
    """Prices with the cache's filled in from the input price (see the factors)."""
    if prices is None:
        return None
    out = dict(prices)
    if "input" in out:
        out.setdefault("cache_read", out["input"] * CACHE_READ_FACTOR)
        out.setdefault("cache_write", out["input"] * CACHE_WRITE_FACTOR)
        out.setdefault("cache_write_1h", out["input"] * CACHE_WRITE_1H_FACTOR)
    return out


def parse_message(body: object, prices: Mapping[str, float] | None) -> ChatResponse:
    """A Messages API reply as a `ChatResponse`; ValueError if it is not one."""
    if not isinstance(body, Mapping):
        raise ValueError("the body is not a JSON object")
    content = body.get("content")
    if not isinstance(content, list):
        raise ValueError(f"content is {_shown(content)}, not a list")
    texts: list[str] = []
    parts = [""]  # the text before each tool call, and after the last
    thoughts: list[ThinkingBlock] = []
    calls: list[ToolCall] = []
    served = False  # a block of a server tool (its use, its result), or another kind
    for block in content:
        if not isinstance(block, Mapping):
            raise ValueError(f"a content block that is not an object: {_shown(block)}")
        kind = block.get("type")
        if kind == "text":
            texts.append(_text(block, "text"))
            parts[-1] += texts[-1]
        elif kind == "thinking":
            signature = block.get("signature")
            signed = signature if isinstance(signature, str) else None
            thoughts.append(ThinkingBlock(_text(block, "thinking"), signed))
        elif kind == "redacted_thinking":
            thoughts.append(ThinkingBlock(redacted=True, data=_text(block, "data")))
        elif kind == "tool_use":
            calls.append(_tool_call(block))
            parts.append("")
        else:  # a server tool's use or result: the reply's blocks are kept whole
            served = True
    usage = body.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    fresh = _count(usage, "input_tokens")
    read = _count(usage, "cache_read_input_tokens")
    written = _count(usage, "cache_creation_input_tokens")
    hour = min(_hour_writes(usage), written)
    output = _count(usage, "output_tokens")
    cost = 0.0
    if prices:
        write = prices.get("cache_write", 0.0)
        cost = (
            fresh * prices.get("input", 0.0)
            + read * prices.get("cache_read", 0.0)
            + (written - hour) * write
            + hour * prices.get("cache_write_1h", write)
            + output * prices.get("output", 0.0)
        ) / 1e6
    stop = body.get("stop_reason")
    return ChatResponse(
        content="".join(texts) if texts else None,
        tool_calls=tuple(calls),
        usage=Usage(fresh + read + written, output, cost),
        finish_reason=stop if isinstance(stop, str) else None,
        message={"role": "assistant", "content": content},
        reasoning=thinking_text(thoughts),
        cache_read_tokens=read,
        cache_write_tokens=written,
        thinking=tuple(thoughts),
        text_parts=tuple(parts) if any(parts[1:]) else (),
        blocks=tuple(dict(block) for block in content) if served else (),
    )


def _hour_writes(usage: Mapping[str, Any]) -> int:
    """The cache writes that live an hour (``cache_control``'s ``ttl: "1h"``), which
    cost more than the 5-minute ones: ``usage.cache_creation`` counts each kind."""
    lives = usage.get("cache_creation")
    if not isinstance(lives, Mapping):
        return 0
    return _count(lives, "ephemeral_1h_input_tokens", "usage.cache_creation")


def _text(block: Mapping[str, Any], key: str) -> str:
    text = block.get(key)
    if not isinstance(text, str):
        raise ValueError(f"a {block.get('type')} block whose {key} is {_shown(text)}")
    return text


def _tool_call(block: Mapping[str, Any]) -> ToolCall:
    name = block.get("name")
    if not isinstance(name, str):
        raise ValueError(f"a tool_use block without a name: {_shown(block)}")
    arguments = block.get("input")
    text = "{}" if arguments is None else json.dumps(arguments, ensure_ascii=False)
    return ToolCall(str(block.get("id") or ""), name, text)
