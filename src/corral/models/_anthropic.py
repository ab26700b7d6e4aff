"""`Anthropic`: Claude over Anthropic's Messages API, spoken natively."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

from .._chat import ChatResponse
from .._checks import positive_int
from .._errors import ConfigError, ModelError
from .._types import Usage
from ._http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    HTTPModel,
    call_setting,
    check_api_key,
    check_extra_body,
    check_prices,
)
from ._messages_api import cache_prices, convert_messages, convert_tools, parse_message

DEFAULT_BASE_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
PRICE_KEYS = ("input", "output", "cache_read", "cache_write", "cache_write_1h")
#: The Messages API needs a bound on every reply; this one when no call names one.
DEFAULT_MAX_TOKENS = 4096
#: The most times one call continues a paused turn (``pause_turn``: a server tool's
#: loop reached its limit) before it fails.
MAX_CONTINUATIONS = 8


class Anthropic(HTTPModel):
    """Async messages with tools on Anthropic's Messages API (``POST /v1/messages``),
    taking and giving the same chat turns as `OpenAICompatible`, so `ToolAgent`
    (or any agent written for a `corral.ChatModel`) works with it unchanged.

    System messages are sent as the top-level ``system``; tool calls and tool
    messages as ``tool_use`` and ``tool_result`` blocks. The reply's thinking
    blocks are its ``reasoning`` and stay, signed, in its ``message`` (which
    goes back as it came when a conversation includes it). ``seed`` is ignored:
    the API has none.

    ``api_key=None`` reads ``ANTHROPIC_API_KEY`` (sent as ``x-api-key``; none:
    no key, as a local fake wants); ``base_url=None`` reads
    ``ANTHROPIC_BASE_URL``, else Anthropic's (without ``/v1``). ``version`` is
    the ``anthropic-version`` header and ``beta`` a list of ``anthropic-beta``
    features. ``max_tokens`` bounds a reply when the call names no bound.
    ``prices`` in dollars per million tokens: ``input``, ``output`` and the
    prompt cache's ``cache_read``, ``cache_write`` and ``cache_write_1h`` (a
    write with ``ttl: "1h"``; by default 0.1, 1.25 and 2 times ``input``,
    Anthropic's multipliers); the reply's usage counts every
    prompt token (cached ones too) and its ``cache_read_tokens`` and
    ``cache_write_tokens`` say how many came from or went to the cache.
    ``extra_body`` is merged into every request (e.g. ``{"thinking": {"type":
    "enabled", "budget_tokens": 2048}}``; not ``max_tokens`` nor ``temperature``,
    which each call sends). ``timeout`` and
    ``max_response_bytes`` are as `OpenAICompatible`'s.

    A reply that pauses its turn (``stop_reason`` ``pause_turn``: a server tool's
    loop reached its limit) is continued, its content sent back as the API asks,
    up to `MAX_CONTINUATIONS` times (then a `corral.ModelError`): the call's reply
    is the whole turn, its content and usage those of every request it took.

    Errors as `OpenAICompatible`'s: a 429 is `corral.RateLimited` with its
    ``retry-after``; a 529 (overloaded) is `corral.ModelUnavailable`, retried
    as a failed attempt, or `corral.RateLimited` when its ``retry-after`` says how
    long to wait (as a 503 does: the account's ``anthropic-ratelimit-*`` headers do
    not); other refusals are `corral.ModelError`.
    """

    reply_kind = "a Messages API reply"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 600.0,
        prices: Mapping[str, float] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        *,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        version: str = API_VERSION,
        beta: Sequence[str] = (),
        max_connections: int | None = None,
    ) -> None:
        if base_url is None:
            base_url = os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL
        if api_key is None:
            api_key = os.environ.get("ANTHROPIC_API_KEY") or None
        self.api_key = check_api_key(api_key)
        if not isinstance(version, str) or not version.strip():
            raise ConfigError(f"version must be a non-empty string, not {version!r}")
        if isinstance(beta, str) or not all(isinstance(b, str) and b for b in beta):
            raise ConfigError(f"beta must be a list of feature names, not {beta!r}")
        headers = {"anthropic-version": version.strip()}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        if beta:
            headers["anthropic-beta"] = ",".join(beta)
        super().__init__(
            model, base_url, "/v1/messages", headers, timeout, max_response_bytes, max_connections
        )
        self.max_tokens = positive_int("max_tokens", max_tokens)
        self.prices = cache_prices(check_prices(prices, PRICE_KEYS))
        # Not "model": it would replace the model each call names (a task's own).
        self.extra_body = check_extra_body(
            extra_body,
            ("messages", "tools", "system", "model"),
            {
                "max_tokens": f"Anthropic(max_tokens=...) or {call_setting('max_tokens')}",
                "temperature": call_setting("temperature"),
            },
        )

    def parse(self, body: object) -> ChatResponse:
        return parse_message(body, self.prices)

    async def post(self, body: Mapping[str, Any]) -> ChatResponse:
        """Send ``body``; a paused turn continued until it ends (see the class)."""
        replies = [await super().post(body)]
        blocks = list(replies[0].message["content"])
        turns = list(body["messages"])
        said = turns.pop() if turns and turns[-1].get("role") == "assistant" else None
        before = list(said["content"]) if said else []  # a turn the caller began
        while replies[-1].finish_reason == "pause_turn":
            if len(replies) > MAX_CONTINUATIONS:
                raise ModelError(
                    f"the turn {self.shown_url} answered was still paused (stop_reason "
                    f"'pause_turn') after {MAX_CONTINUATIONS} continuations"
                )
            paused = {"role": "assistant", "content": before + blocks}
            replies.append(await super().post({**body, "messages": [*turns, paused]}))
            blocks += replies[-1].message["content"]
        if len(replies) == 1:
            return replies[0]
        whole = parse_message({"content": blocks, "stop_reason": replies[-1].finish_reason}, None)
        timed = [r.latency for r in replies if r.latency is not None]
        return dataclasses.replace(
            whole,
            latency=sum(timed) if len(timed) == len(replies) else None,
            usage=sum((r.usage for r in replies), Usage()),
            cache_read_tokens=sum(r.cache_read_tokens for r in replies),
            cache_write_tokens=sum(r.cache_write_tokens for r in replies),
        )

    def request_body(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        max_tokens: int | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """The JSON body `complete` sends: ``temperature`` among ``options`` when
        not None (``seed`` never: the API has none)."""
        system, turns = convert_messages(messages)
        body: dict[str, Any] = {
            "model": model or self.model,
            "max_tokens": self.max_tokens if max_tokens is None else max_tokens,
            "messages": turns,
        }
        if system is not None:
            body["system"] = system
        if tools:
            body["tools"] = convert_tools(tools)
        if options.get("temperature") is not None:
            body["temperature"] = options["temperature"]
        body.update(self.extra_body)
        return body
