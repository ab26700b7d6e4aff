"""A hostile endpoint never hangs a run or blows its memory: `OpenAICompatible` and
`ToolAgent` against `HostileChatServer` over real HTTP on 127.0.0.1 (and
`Anthropic` against `FakeAnthropicServer`, where the case is not OpenAI's own)."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.models import Anthropic, OpenAICompatible
from corral.runtime._ratelimit import as_rate_limit
from corral.testing import (
    ChatReply,
    FakeAnthropicServer,
    FakeEnvironment,
    FakeModelServer,
    HostileChatServer,
    HostileReply,
)

pytestmark = pytest.mark.anyio

HELLO = [{"role": "user", "content": "hello"}]
#: Longer than any of these tests needs when fixed; before, some looped forever.
NO_HANG = 10.0
MB = 1024 * 1024


#: The model clients, each against its API's fake.
PROVIDERS = ("openai", "anthropic")


def client(server: HostileChatServer, **kwargs: Any) -> OpenAICompatible:
    return OpenAICompatible("m", base_url=server.url, api_key="", **kwargs)


def hostile(provider: str, reply: Any) -> FakeModelServer:
    """A fake of ``provider``'s API that answers every request with ``reply`` (or
    each with the next of a list of replies)."""
    if provider == "openai":
        return HostileChatServer(reply)
    return FakeAnthropicServer(reply if isinstance(reply, list) else lambda body: reply)


def model_for(
    provider: str, server: FakeModelServer, **kwargs: Any
) -> OpenAICompatible | Anthropic:
    if provider == "openai":
        return OpenAICompatible("m", base_url=server.url, api_key="", **kwargs)
    return Anthropic("m", base_url=server.url, api_key="", **kwargs)


async def run_one(model: OpenAICompatible | Anthropic, **runner: Any) -> corral.TrialRecord:
    """One trial of a ToolAgent on ``model``; its record."""
    tasks = {"t": Meta("a", "e", model="m")}
    run = corral.CorralRunner(
        tasks,
        {"a": ToolAgent(model)},
        {"e": FakeEnvironment()},
        store=corral.MemoryStore(),
        **{"backoff_base": 0.0, **runner},
    )
    with anyio.fail_after(NO_HANG):
        report = await run.run("hostile")
    return report.tasks["t"].trials[0]


async def test_an_exhausted_quota_ends_the_trial_after_one_request() -> None:
    quota = ChatReply.failure(429, "You exceeded your current quota", code="insufficient_quota")
    with HostileChatServer(quota) as server:
        record = await run_one(client(server))
    assert str(record.status) == "error" and record.attempts == 1
    assert record.error is not None and record.error.startswith("ModelError: HTTP 429")
    assert "exceeded your current quota" in record.error
    assert server.calls == 1


def test_a_refusal_with_status_429_is_not_a_rate_limit() -> None:
    refused = corral.ModelError("HTTP 429: quota", status_code=429)
    assert as_rate_limit(refused) is None
    assert as_rate_limit(corral.RateLimited("slow down", retry_after=1)) is not None


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_retry_after_zero_forever_ends_the_trial(provider: str) -> None:
    with hostile(provider, ChatReply.rate_limited(0)) as server:
        record = await run_one(model_for(provider, server))  # the default caps
    assert str(record.status) == "error" and record.error is not None
    assert record.error.startswith("RateLimited: HTTP 429")
    assert "still rate limited after 100 waits (max_deferrals=100)" in record.error
    assert server.calls == 101


@pytest.mark.parametrize(
    "reply",
    [
        ChatReply.rate_limited(1e9),
        ChatReply.rate_limited(1e300),
        ChatReply.rate_limited(retry_after_ms=1e15),
        ChatReply.rate_limited(reset="99999h"),
        ChatReply.rate_limited("Fri, 31 Dec 9999 23:59:59 GMT"),
    ],
    ids=["1e9", "1e300", "ms-1e15", "99999h", "year-9999"],
)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_absurd_waits_are_capped(provider: str, reply: ChatReply) -> None:
    with hostile(provider, reply) as server:
        model = model_for(provider, server)
        record = await run_one(model, max_rate_limit_wait=0.01, max_deferrals=2)
    assert str(record.status) == "error" and record.error is not None
    assert "waited 0.01 s (max_rate_limit_wait)" in record.error
    assert server.calls == 3


@pytest.mark.parametrize(
    "reply",
    # Each read waits a tenth of the deadline (10 ms), so only a deadline on the whole
    # request ends it (a per-read timeout would not).
    [HostileReply.slow_headers(100), HostileReply.slow_body(100), HostileReply.endless(0.01)],
    ids=["slow-headers", "slow-body", "endless"],
)
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_one_deadline_bounds_the_whole_request(provider: str, reply: HostileReply) -> None:
    with hostile(provider, reply) as server:
        model = model_for(provider, server, timeout=0.1)
        start = anyio.current_time()
        with anyio.fail_after(NO_HANG), pytest.raises(corral.ModelUnavailable) as caught:
            await model.complete(HELLO)
        took = anyio.current_time() - start
    assert model.url in str(caught.value) and model.url.startswith(server.url)
    assert "within the timeout of 0.1 s" in str(caught.value)
    assert 0.1 <= took < 2.1  # the deadline, and slack for a loaded machine


async def test_a_slow_reply_in_time_is_read() -> None:
    with HostileChatServer(HostileReply.slow_body(5000)) as server:
        response = await client(server, timeout=5).complete(HELLO)
    assert response.content == "slow but sure"
