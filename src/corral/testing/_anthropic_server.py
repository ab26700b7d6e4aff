"""`FakeAnthropicServer`: a scriptable Anthropic Messages API (``POST /v1/messages``)
on 127.0.0.1, answering with the same `ChatReply` values as `FakeChatServer`."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any

from ._chat_server import ChatReply, FakeModelServer

#: Anthropic's error type for each status its API answers with.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


class FakeAnthropicServer(FakeModelServer):
    """Anthropic's ``POST /v1/messages`` on 127.0.0.1 (``url`` is the base URL to
    give `corral.models.Anthropic`, without ``/v1``); a `FakeModelServer` (see it
    for the scripting), so a script gets the request's JSON body (``system``,
    ``messages`` of content blocks, ``tools``) and returns a `ChatReply`.

    A reply's ``reasoning`` is sent as a thinking block before its text (its
    ``redacted`` as a ``redacted_thinking`` block before that), its tool calls
    as ``tool_use`` blocks, its ``cache`` as the usage's cache read and write
    tokens, and an error in Anthropic's error shape (a 529 as
    ``overloaded_error``). A thinking block's ``signature`` is an HMAC of its
    text (`thinking_signature`), and a redacted block's data is signed too.
    Like the real API it answers 400 to a request without
    ``anthropic-version``, ``max_tokens`` or messages, with a role other than
    user and assistant in ``messages``, with a text block that is empty or only
    whitespace, with a message of no content (but a last assistant one), whose
    tool results do not answer the tool uses of the turn before them, with a
    thinking block whose signature (or a redacted block whose data) is not the
    one sent, or, with
    ``thinking`` enabled, whose last assistant turn used tools without
    beginning with its thinking: the turn is the tool loop since the last user
    message that is more than tool results, and only its first reply must begin
    so (Claude thinks before its first tool call, not again after a tool's
    result, unless thinking is interleaved).
    """

    paths = ("/v1/messages",)

    def refuse(self, body: dict[str, Any], headers: Mapping[str, str]) -> str | None:
        if not isinstance(body, dict):
            return "the request body must be a JSON object"
        if not headers.get("anthropic-version"):
            return "anthropic-version: header is required"
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens: Field required"
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return "messages: at least one message is required"
        asked: set[Any] = set()
        for index, message in enumerate(messages):
            role = message.get("role") if isinstance(message, Mapping) else None
            if role not in ("user", "assistant"):
                return f"messages.{index}.role: Input should be 'user' or 'assistant'"
            content = message.get("content")
            listed = content if isinstance(content, list) else []
            blocks = [b for b in listed if isinstance(b, Mapping)]
            texts = (
                [content]
                if isinstance(content, str)
                else [b.get("text") for b in blocks if b.get("type") == "text"]
            )
            if content == [] and (role != "assistant" or index < len(messages) - 1):
                return (
                    f"messages.{index}: all messages must have non-empty content except for "
                    "the optional final assistant message"
                )
            if any(not text for text in texts):
                return f"messages.{index}: text content blocks must be non-empty"
            if any(isinstance(text, str) and not text.strip() for text in texts):
                return f"messages.{index}: text content blocks must contain non-whitespace text"
            answered = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            if role == "user" and asked - answered:
                return f"messages.{index}: tool_use ids without tool_result: {sorted(asked)}"
            if answered - asked:
                return f"messages.{index}: unexpected tool_use_id in tool_result blocks"
            asked = {b.get("id") for b in blocks if b.get("type") == "tool_use"}
            for at, block in enumerate(blocks):
                forged = _forged(block)
                if forged:
                    kind = block["type"]
                    return f"messages.{index}.content.{at}: Invalid `{forged}` in `{kind}` block"
        return _unthought(body, messages)

    def render(self, request: Mapping[str, Any], reply: ChatReply, number: int) -> bytes:
        return _message(request, reply, number)

    def error_body(self, status: int, message: str, code: str | None) -> bytes:
        kind = code or _ERROR_TYPES.get(status, "api_error")
        return json.dumps({"type": "error", "error": {"type": kind, "message": message}}).encode()


#: What the fake signs thinking with: one key for every instance, so a conversation
#: goes back to another fake (a resumed run's) as it would to the real API.
_KEY = b"corral-fake-anthropic-thinking"


def thinking_signature(thinking: str) -> str:
    """The ``signature`` `FakeAnthropicServer` gives (and wants back on) a thinking
    block of this text."""
    digest = hmac.new(_KEY, thinking.encode("utf-8", "surrogatepass"), hashlib.sha256)
    return base64.b64encode(digest.digest()).decode()


def _redacted(hidden: str) -> str:
    data = base64.b64encode(hidden.encode("utf-8", "surrogatepass")).decode()
    return f"{data}.{thinking_signature(data)}"


def _forged(block: Mapping[str, Any]) -> str | None:
    """Which field of a thinking block is not what the fake sent, if one is not."""
    kind = block.get("type")
    if kind == "thinking":
        text = block.get("thinking")
        ok = isinstance(text, str) and block.get("signature") == thinking_signature(text)
        return None if ok else "signature"
    if kind == "redacted_thinking":
        data, _, sign = str(block.get("data")).rpartition(".")
        return None if data and sign == thinking_signature(data) else "data"
    return None


def _unthought(body: Mapping[str, Any], messages: list[Any]) -> str | None:
    """With thinking on, the last assistant turn that used tools must begin with its
    thinking (as the real API wants it). That turn is the tool loop since the last
    user message that is more than tool results: Claude thinks before its first tool
    call, not again after a tool's result, so only the loop's first assistant message
    must begin with thinking."""
    thinking = body.get("thinking")
    if not isinstance(thinking, Mapping) or thinking.get("type") == "disabled":
        return None
    begun = None  # the index of the turn's first assistant message
    used_tools = False
    for index in range(len(messages) - 1, -1, -1):
        blocks = _content_blocks(messages[index])
        if messages[index].get("role") == "assistant":
            begun = index
            used_tools = used_tools or any(b.get("type") == "tool_use" for b in blocks)
        elif not blocks or any(b.get("type") != "tool_result" for b in blocks):
            break  # a user turn of its own: the assistant's turn began after it
    if begun is None or not used_tools:
        return None
    blocks = _content_blocks(messages[begun])
    first = blocks[0].get("type") if blocks else None
    if first in ("thinking", "redacted_thinking"):
        return None
    return (
        f"messages.{begun}.content.0.type: Expected `thinking` or `redacted_thinking`, "
        f"but found `{first}`. When `thinking` is enabled, a final `assistant` message "
        "must start with a thinking block (preceeding the lastmost set of `tool_use` "
        "and `tool_result` blocks)."
    )


def _content_blocks(message: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _message(request: Mapping[str, Any], reply: ChatReply, number: int) -> bytes:
    content: list[dict[str, Any]] = []
    if reply.redacted is not None:
        content.append({"type": "redacted_thinking", "data": _redacted(reply.redacted)})
    if reply.reasoning is not None:
        signed = thinking_signature(reply.reasoning)
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": signed})
    content.extend(dict(block) for block in reply.served)
    if reply.content:
        content.append({"type": "text", "text": reply.content})
    for i, (name, arguments) in enumerate(reply.tool_calls):
        if isinstance(arguments, str):  # malformed on purpose: sent as the input itself
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        block = {"type": "tool_use", "id": f"toolu_fake{number}_{i}", "name": name}
        content.append({**block, "input": arguments})
    if reply.usage is not None:
        prompt, completion = reply.usage
    else:
        asked = [request.get("system"), request.get("messages"), request.get("tools")]
        prompt = len(json.dumps(asked)) // 4 + 1
        completion = len(json.dumps(content)) // 4 + 1
    read, written = reply.cache
    body = {
        "id": f"msg_fake{number}",
        "type": "message",
        "role": "assistant",
        "model": request.get("model"),
        "content": content,
        "stop_reason": "tool_use" if reply.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": prompt,
            "output_tokens": completion,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written,
        },
    }
    return json.dumps(body).encode()


def chat_request(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Messages API request as the chat-completions request it stands for (system
    message, tool calls, tool messages, function tools), so a script written for
    `FakeChatServer` serves `FakeAnthropicServer` too:
    ``FakeAnthropicServer(lambda body: script(chat_request(body)))``."""
    system = body.get("system")
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": _joined(system)})
    for message in body.get("messages") or ():
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        texts = [b for b in blocks if b.get("type") == "text"]
        if message.get("role") == "assistant":
            calls = [
                {
                    "id": b.get("id"),
                    "type": "function",
                    "function": {"name": b.get("name"), "arguments": json.dumps(b.get("input"))},
                }
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            turn: dict[str, Any] = {"role": "assistant", "content": _joined(texts) or None}
            messages.append({**turn, "tool_calls": calls} if calls else turn)
            continue
        for block in blocks:
            if block.get("type") == "tool_result":
                answer = {"role": "tool", "tool_call_id": block.get("tool_use_id")}
                messages.append({**answer, "content": _joined(block.get("content"))})
        if texts:
            messages.append({"role": "user", "content": _joined(texts)})
    request = {k: v for k, v in body.items() if k not in ("system", "messages", "tools")}
    request["messages"] = messages
    if body.get("tools"):
        request["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": tool.get("name"),
                    "description": tool.get("description", ""),
                    "parameters": tool.get("input_schema"),
                },
            }
            for tool in body["tools"]
        ]
    return request


def _joined(content: Any) -> str:
    """The text of a string or a list of blocks."""
    if isinstance(content, str) or content is None:
        return content or ""
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")
