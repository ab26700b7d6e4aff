"""What a chat model returns, and what Corral's agents ask of one (no HTTP here)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._types import NO_USAGE, Usage


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of a reply; ``arguments`` is the JSON text the model wrote."""

    id: str
    name: str
    arguments: str


#: The key of an assistant message (in Corral's OpenAI-style chat turns) that holds
#: the reply's thinking blocks, as LiteLLM names it: a list of
#: ``{"type": "thinking", "thinking": ..., "signature": ...}`` and
#: ``{"type": "redacted_thinking", "data": ...}`` (`ThinkingBlock.as_dict`).
THINKING_BLOCKS = "thinking_blocks"

#: The key of an assistant message (in Corral's OpenAI-style chat turns) that says
#: where its text stands among its ``tool_calls``: a list of one string more than
#: the calls, the i-th written before call i and the last after them all
#: (`ChatResponse.text_parts`). Only Anthropic's reply can interleave them; a
#: message whose ``content`` is not their concatenation is sent as its content says.
TEXT_PARTS = "text_parts"

#: The key of an assistant message (in Corral's OpenAI-style chat turns) that holds the
#: reply's content blocks as Anthropic sent them, when some are of a kind no other key
#: holds: its server tools' uses and results (``server_tool_use``,
#: ``web_search_tool_result``, ...; `ChatResponse.blocks`). The turn goes back as these
#: blocks while its ``content`` and ``tool_calls`` are still theirs (else as they say).
CONTENT_BLOCKS = "content_blocks"


@dataclass(frozen=True, slots=True)
class ThinkingBlock:
    """One block of a model's thinking as the provider sent it, to be sent back
    unchanged (Anthropic refuses a tool-use turn whose thinking is missing or
    altered): its ``text`` and ``signature``, or for a redacted block only its
    opaque ``data`` (``redacted`` true, ``text`` empty)."""

    text: str = ""
    signature: str | None = None
    redacted: bool = False
    data: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The block as a message carries it (see `THINKING_BLOCKS`)."""
        if self.redacted:
            return {"type": "redacted_thinking", "data": self.data or ""}
        out: dict[str, Any] = {"type": "thinking", "thinking": self.text}
        if self.signature is not None:
            out["signature"] = self.signature
        return out

    @classmethod
    def of(cls, raw: object) -> ThinkingBlock | None:
        """A block from its dict (`as_dict`'s shape); None if ``raw`` is not one."""
        if not isinstance(raw, Mapping):
            return None
        kind = raw.get("type")
        if kind == "redacted_thinking" and isinstance(raw.get("data"), str):
            return cls(redacted=True, data=raw["data"])
        signature = raw.get("signature")
        if kind == "thinking" and isinstance(raw.get("thinking"), str):
            return cls(raw["thinking"], signature if isinstance(signature, str) else None)
        return None


def thinking_blocks(raw: object) -> tuple[ThinkingBlock, ...]:
    """The thinking blocks of a list of dicts (what is not one left out)."""
    if not isinstance(raw, list | tuple):
        return ()
    return tuple(b for b in map(ThinkingBlock.of, raw) if b is not None)


def thinking_text(blocks: Sequence[ThinkingBlock]) -> str | None:
    """The reasoning the blocks say (the redacted ones say nothing), None if none."""
    texts = [b.text for b in blocks if not b.redacted]
    return "\n\n".join(texts) if texts else None


@dataclass(frozen=True, slots=True)
class ChatResponse:
    """A chat completion: the text, the tool calls, and the usage (with its cost).

    ``reasoning`` is the model's thinking when the provider returns it (Anthropic's
    thinking blocks, or a message's ``reasoning_content`` or ``reasoning``);
    ``usage.input_tokens`` counts every prompt token, of which ``cache_read_tokens``
    were read from and ``cache_write_tokens`` written to the provider's prompt
    cache (when it says). ``thinking`` is the reasoning as the provider's own
    blocks (Anthropic's, signed, and its redacted ones): a conversation sends
    them back with the assistant turn they came with (under `THINKING_BLOCKS`;
    ``message`` holds them as the provider sent them). ``text_parts`` is
    ``content`` split where the reply's tool calls stand in it (`TEXT_PARTS`),
    when some of it comes after a call (else empty: all of it is before them).
    ``blocks``: the reply's content blocks as the provider sent them, when some are
    of a kind no other field holds (Anthropic's server tools: a web search and its
    results), for the transcript to show and the conversation to send back
    (`CONTENT_BLOCKS`); else empty.
    """

    content: str | None
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = NO_USAGE
    finish_reason: str | None = None
    #: The assistant message as the server sent it.
    message: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    reasoning: str | None = None
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    thinking: tuple[ThinkingBlock, ...] = ()
    text_parts: tuple[str, ...] = ()
    #: Seconds the request took, from its first byte on the wire to its reply read, when
    #: the client measured it (`OpenAICompatible`, `Anthropic`: a wait for a connection
    #: slot before it is not the endpoint's latency), on the event loop's clock (as a
    #: trial's working time: virtual in a test's MockClock); None: whoever calls times it.
    latency: float | None = field(default=None, compare=False)
    blocks: tuple[Mapping[str, Any], ...] = ()


class ChatModel(Protocol):
    """An OpenAI-style chat model (`corral.models.OpenAICompatible`,
    `corral.models.Anthropic`, or a user's own).

    ``model`` names the model asked when a call names none.
    """

    model: str

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
    ) -> ChatResponse: ...


def endpoint_of(model: object) -> str | None:
    """The URL a model client calls (its ``url``, else its ``base_url``), if it says;
    a password in it masked (the endpoint is recorded with each call)."""
    endpoint = getattr(model, "url", None) or getattr(model, "base_url", None)
    return without_password(endpoint) if isinstance(endpoint, str) else None


def call_latency(response: ChatResponse, took: float) -> float:
    """The latency to record of a call that took ``took`` seconds (its caller's timing)
    and answered ``response``: its request's own (`ChatResponse.latency`, without a
    wait for a connection slot) when its client measured it. A request made within the
    call took no longer than the call: a reply carrying a longer latency was kept from
    an earlier request (a user's cache, a replay), which this call did not wait."""
    own = response.latency
    return took if own is None else min(own, took)


#: The user info ends at the authority's last '@' (as httpx reads it): a user may hold
#: one of its own (an email, https://me@corp.com:pass@host/v1); its password, at its ':'.
_USERINFO = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*://[^/?#:]*):[^/?#]*@")


def without_password(url: str) -> str:
    """``url`` with the password of its user info masked (``https://user:***@host/v1``):
    as messages show it and records keep it."""
    return _USERINFO.sub(r"\1:***@", url, count=1)


def parse_response(body: object, prices: Mapping[str, float] | None) -> ChatResponse:
    """A chat completion body as a `ChatResponse`; ValueError if it is not one."""
    if not isinstance(body, Mapping):
        raise ValueError("the body is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
        raise ValueError("the body has no choices")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, Mapping):
        raise ValueError("the first choice has no message")
    content = _content(message.get("content"))
    refusal = message.get("refusal")
    if not content and isinstance(refusal, str) and refusal:
        content = refusal  # OpenAI's refusal, with no content: what the model answered
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ValueError(f"tool_calls is {_shown(raw_calls)}, not a list")
    calls = []
    for raw in raw_calls:
        function = raw.get("function") if isinstance(raw, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ValueError(f"a tool call without a function name: {_shown(raw)}")
        arguments = function.get("arguments")
        if not isinstance(arguments, str):  # some servers send an object, not its text
            arguments = "{}" if arguments is None else _dumps(arguments)
        calls.append(ToolCall(str(raw.get("id") or ""), function["name"], arguments))
    usage = body.get("usage") if isinstance(body.get("usage"), Mapping) else {}
    assert isinstance(usage, Mapping)
    input_tokens = _count(usage, "prompt_tokens")
    output_tokens = _count(usage, "completion_tokens")
    cached = min(_cached_tokens(usage), input_tokens)
    cost = 0.0
    if prices:
        price = prices.get("input", 0.0)
        cost = (
            (input_tokens - cached) * price
            + cached * prices.get("cache_read", price)
            + output_tokens * prices.get("output", 0.0)
        ) / 1e6
    finish = choice.get("finish_reason")
    reasoning = _reasoning(message)
    # A gateway in front of Anthropic (LiteLLM) passes its signed thinking blocks on.
    thinking = thinking_blocks(message.get(THINKING_BLOCKS))
    if reasoning is None:
        reasoning = thinking_text(thinking)
    return ChatResponse(
        content=content,
        tool_calls=tuple(calls),
        usage=Usage(input_tokens, output_tokens, cost),
        finish_reason=finish if isinstance(finish, str) else None,
        message=message,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        cache_read_tokens=cached,
        thinking=thinking,
    )


def _reasoning(message: Mapping[str, Any]) -> str | None:
    """A reasoning model's thinking: DeepSeek, SGLang and vLLM before 0.9 put it in
    ``reasoning_content``; vLLM since (keeping ``reasoning_content`` null for a while),
    OpenRouter, Ollama and Groq in ``reasoning``. The first of them holding text."""
    for name in ("reasoning_content", "reasoning"):
        value = message.get(name)
        if isinstance(value, str) and value:
            return value
    return None


def _cached_tokens(usage: Mapping[str, Any]) -> int:
    """The prompt tokens the provider's cache served: OpenAI counts them (among
    ``prompt_tokens``) in ``usage.prompt_tokens_details.cached_tokens``."""
    details = usage.get("prompt_tokens_details")
    if not isinstance(details, Mapping):
        return 0
    return _count(details, "cached_tokens", "usage.prompt_tokens_details")


def _content(content: object) -> str | None:
    """A message's text: a string as it is; a list of text parts (``{"type": "text",
    "text": ...}``, as some servers send it) their text joined; anything else kept as
    JSON (a repr could not be read back)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list) and content and all(_is_text_part(p) for p in content):
        return "".join(part["text"] for part in content)
    return _dumps(content)


def _is_text_part(part: object) -> bool:
    return (
        isinstance(part, Mapping)
        and part.get("type") == "text"
        and isinstance(part.get("text"), str)
    )


#: More tokens than any call can use (and than a store's 64-bit integer holds).
_MAX_TOKENS = 2**53


def _count(usage: Mapping[str, Any], name: str, where: str = "usage") -> int:
    """A token count: absent (or null) is 0; anything but a whole number from 0 to
    `_MAX_TOKENS` is a malformed reply, never a silent 0 (``12.0`` is 12). ``where``
    names ``usage`` in the reply, for the message."""
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if type(value) is not int or not 0 <= value < _MAX_TOKENS:
        raise ValueError(f"{where}.{name} is {_shown(value)}, not a token count")
    return value


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:80] + "..."


def _dumps(value: object) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)
