"""`OpenAICompatible`: chat completions with tools over any OpenAI-compatible endpoint."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from .._chat import ChatResponse, parse_response
from .._errors import ConfigError
from ._http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    HTTPModel,
    call_setting,
    check_api_key,
    check_extra_body,
    check_prices,
)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PRICE_KEYS = ("input", "output", "cache_read")
#: What a request carries from the call's own settings (`complete`'s keywords).
CALL_SETTINGS = ("max_tokens", "temperature", "seed")
#: The request fields that can carry a call's token limit: ``max_tokens``, which most
#: OpenAI-compatible servers read, and ``max_completion_tokens``, which OpenAI's
#: reasoning models (o1, o3, o4-mini, the gpt-5 family) require (they refuse the other).
TOKEN_LIMIT_FIELDS = ("max_tokens", "max_completion_tokens")


class OpenAICompatible(HTTPModel):
    """Async chat completions with tools on an OpenAI-compatible endpoint (OpenAI,
    vLLM, SGLang, Ollama, OpenRouter, Together, most gateways).

    ``api_key=None`` reads ``OPENAI_API_KEY`` (none: no ``Authorization``
    header, as local servers want); ``base_url=None`` reads ``OPENAI_BASE_URL``,
    else OpenAI's. ``timeout`` bounds connecting, and then the whole request from
    its first byte sent to its reply's last byte read, in seconds.
    ``prices={"input": ..., "output": ...}`` in dollars per million tokens turn
    usage into cost; ``"cache_read"`` prices the prompt tokens the provider's cache
    served (`ChatResponse.cache_read_tokens`; the input price when not given).
    ``token_limit_field`` is the request field that carries a call's ``max_tokens``:
    ``"max_tokens"`` (the default), or ``"max_completion_tokens"`` for OpenAI's
    reasoning models (o1, o3, o4-mini, the gpt-5 family), which refuse ``max_tokens``.
    ``extra_body`` is merged into every request (not ``temperature``, ``seed``,
    ``max_tokens`` or ``max_completion_tokens``: each call's own, as
    `corral.agents.ToolAgent` gives and records them).
    ``max_response_bytes`` caps a reply's decoded body (16 MB by default), checked
    while it is read, so a gzip bomb or a runaway reply is a `corral.ModelError`
    naming the endpoint, not a process out of memory.
    ``max_connections`` bounds this client's requests in flight at once (Inspect's
    ``max_connections``): the rest wait, first come first served, in the
    `corral.concurrency` scope `connection_scope` names (one per model and endpoint),
    which holds across a run's trials and scorers and its Ray hosts alike; None (the
    default) leaves them to the run's limits.

    Errors follow Corral's rules and nothing is retried inside: a 429 (or a 503
    with a Retry-After) raises `corral.RateLimited` with the server's wait, so
    the run's adaptive limit acts; a 5xx, a timeout or a dropped connection
    raises `corral.ModelUnavailable` (the attempt is retried); any other refusal
    (400, 401, 403, 404, ...) raises `corral.ModelError` with the server's message
    (the trial ends). In a run, one pooled connection pool serves every trial,
    sized to the run's limits; outside one, ``async with model:`` opens a pool,
    and a call with none open uses a connection of its own.
    """

    reply_kind = "a chat completion"

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        prices: Mapping[str, float] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        token_limit_field: str = "max_tokens",
        *,
        max_connections: int | None = None,
    ) -> None:
        if base_url is None:
            base_url = os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        if api_key is None:
            api_key = os.environ.get("OPENAI_API_KEY") or None
        self.api_key = check_api_key(api_key)
        headers = {"authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        super().__init__(
            model,
            base_url,
            "/chat/completions",
            headers,
            timeout,
            max_response_bytes,
            max_connections,
        )
        self.prices = check_prices(prices, PRICE_KEYS)
        if not isinstance(token_limit_field, str) or token_limit_field not in TOKEN_LIMIT_FIELDS:
            raise ConfigError(
                f"token_limit_field={token_limit_field!r} is not a field that carries a "
                f"call's token limit; expected {' or '.join(map(repr, TOKEN_LIMIT_FIELDS))} "
                "(OpenAI's reasoning models, o1, o3, o4-mini and gpt-5, want the second)"
            )
        self.token_limit_field = token_limit_field
        settings = {k: call_setting(k) for k in CALL_SETTINGS if k != "max_tokens"}
        # Either field: the other would go beside the call's (a request the API refuses).
        limit = (
            f"{call_setting('max_tokens')}, sent as {token_limit_field!r} "
            "(OpenAICompatible(token_limit_field=...) names the field)"
        )
        settings.update(dict.fromkeys(TOKEN_LIMIT_FIELDS, limit))
        # Not "model" either: it would replace the model each call names (a task's own),
        # and the call be recorded as made by that one.
        self.extra_body = check_extra_body(extra_body, ("messages", "tools", "model"), settings)

    def parse(self, body: object) -> ChatResponse:
        return parse_response(body, self.prices)

    def request_body(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        model: str | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """The JSON body `complete` sends: ``max_tokens`` (in ``token_limit_field``),
        ``temperature`` and ``seed`` among ``options`` are sent when not None."""
        body: dict[str, Any] = {"model": model or self.model, "messages": list(messages)}
        if tools:
            body["tools"] = list(tools)
        body.update(
            (self.token_limit_field if name == "max_tokens" else name, value)
            for name, value in options.items()
            if value is not None
        )
        body.update(self.extra_body)
        return body
