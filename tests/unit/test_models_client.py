"""`OpenAICompatible` over real HTTP on 127.0.0.1 against `FakeChatServer`: replies,
tool calls, usage and cost, every error class, Retry-After in its three forms,
a dropped connection, a server that never answers, and bad input."""

from __future__ import annotations

import base64
import email.utils
import functools
import http.client
import json
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.history import ModelCallPayload, decode
from corral.models import Anthropic, ChatResponse, OpenAICompatible
from corral.models._status import duration, retry_after
from corral.runtime import RetryPolicy
from corral.scorers import exact
from corral.testing import (
    ChatReply,
    FakeChatServer,
    FakeEnvironment,
    HostileChatServer,
    HostileReply,
)

pytestmark = pytest.mark.anyio

HELLO = [{"role": "user", "content": "hello"}]


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer() as fake:
        yield fake


def client(server: FakeChatServer, **kwargs: Any) -> OpenAICompatible:
    return OpenAICompatible("test-model", base_url=server.url, **kwargs)


async def test_text_reply_usage_and_cost(server: FakeChatServer) -> None:
    server.enqueue(ChatReply.text("hi there", usage=(1200, 300)))
    model = client(server, prices={"input": 2.5, "output": 10}, extra_body={"top_p": 0.5})
    response = await model.complete(HELLO, max_tokens=64, temperature=0.0, seed=7)
    assert response.content == "hi there" and response.tool_calls == ()
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (1200, 300)
    assert response.usage.cost == pytest.approx((1200 * 2.5 + 300 * 10) / 1e6)
    assert server.requests == [
        {
            "model": "test-model",
            "messages": HELLO,
            "max_tokens": 64,
            "temperature": 0.0,
            "seed": 7,
            "top_p": 0.5,
        }
    ]


async def test_cached_prompt_tokens_are_counted_and_priced() -> None:
    """OpenAI says how many prompt tokens its cache served in ``prompt_tokens_details``."""
    usage = {
        "prompt_tokens": 1000,
        "completion_tokens": 10,
        "prompt_tokens_details": {"cached_tokens": 800},
        "completion_tokens_details": {"reasoning_tokens": 4},
    }
    body = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}], "usage": usage}
    prices = {"input": 2.0, "output": 8.0, "cache_read": 0.5}
    with HostileChatServer([HostileReply.raw(body)] * 2) as hostile:
        priced = await client(hostile, prices=prices).complete(HELLO)
        input_price_only = await client(hostile, prices={"input": 2.0}).complete(HELLO)
    assert priced.cache_read_tokens == 800 and priced.usage.input_tokens == 1000
    assert priced.usage.cost == pytest.approx((200 * 2.0 + 800 * 0.5 + 10 * 8.0) / 1e6)
    # Without a cache price, a cached token costs what any input token does.
    assert input_price_only.usage.cost == pytest.approx(1000 * 2.0 / 1e6)


async def test_tool_calls_parallel_and_malformed(server: FakeChatServer) -> None:
    server.enqueue(ChatReply.tools(("add", {"a": 1, "b": 2}), ("mul", '{"a": 3,')))
    tools = [corral.Tool("add").to_openai(), corral.Tool("mul").to_openai()]
    response = await client(server).complete(HELLO, tools=tools, model="other")
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("add", '{"a": 1, "b": 2}'),
        ("mul", '{"a": 3,'),  # kept as written: the agent decides what to do with it
    ]
    assert response.finish_reason == "tool_calls"
    assert server.requests[0]["tools"] == tools and server.requests[0]["model"] == "other"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (ChatReply.rate_limited(7), 7.0),
        (ChatReply.rate_limited(retry_after_ms=250), 0.25),
        (ChatReply.rate_limited(reset="1m30.5s"), 90.5),
        (ChatReply.rate_limited(), None),
        (ChatReply.rate_limited(3, status=503), 3.0),
    ],
    ids=["seconds", "ms", "reset", "no-header", "503"],
)
async def test_rate_limits_carry_the_servers_wait(
    server: FakeChatServer, reply: ChatReply, expected: float | None
) -> None:
    server.enqueue(reply)
    with pytest.raises(corral.RateLimited) as caught:
        await client(server).complete(HELLO)
    assert caught.value.retry_after == expected
    assert "Rate limit reached" in str(caught.value)
    assert server.calls == 1  # no hidden retry


async def test_retry_after_as_an_http_date(server: FakeChatServer) -> None:
    server.enqueue(ChatReply.rate_limited(email.utils.formatdate(time.time() + 30, usegmt=True)))
    with pytest.raises(corral.RateLimited) as caught:
        await client(server).complete(HELLO)
    assert caught.value.retry_after is not None and 27 <= caught.value.retry_after <= 31


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408])
async def test_server_errors_are_transient(server: FakeChatServer, status: int) -> None:
    server.enqueue(ChatReply.failure(status, "upstream overloaded"))
    with pytest.raises(corral.ModelUnavailable, match="upstream overloaded") as caught:
        await client(server).complete(HELLO)
    assert caught.value.status_code == status
    assert RetryPolicy(max_retries=1).retryable(caught.value, 0)
    assert server.calls == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_refusals_are_not_retried_and_carry_the_message(
    server: FakeChatServer, status: int
) -> None:
    server.enqueue(ChatReply.failure(status, f"refused with {status}: check your request"))
    with pytest.raises(corral.ModelError) as caught:
        await client(server).complete(HELLO)
    assert f"HTTP {status}" in str(caught.value)
    assert f"refused with {status}: check your request" in str(caught.value)
    assert not RetryPolicy(max_retries=5).retryable(caught.value, 0)
    assert server.calls == 1


async def test_quota_exhausted_is_not_a_rate_limit(server: FakeChatServer) -> None:
    server.enqueue(ChatReply.failure(429, "You exceeded your quota", code="insufficient_quota"))
    with pytest.raises(corral.ModelError, match="exceeded your quota"):
        await client(server).complete(HELLO)


async def test_dropped_connection_mid_response(server: FakeChatServer) -> None:
    server.enqueue(ChatReply.drop(), ChatReply.text("after the drop"))
    model = client(server)
    async with model:  # the pool survives a broken connection
        with pytest.raises(corral.ModelUnavailable, match="RemoteProtocolError"):
            await model.complete(HELLO)
        assert (await model.complete(HELLO)).content == "after the drop"


async def test_a_server_that_never_answers_times_out(server: FakeChatServer) -> None:
    server.enqueue(ChatReply.hang())
    with pytest.raises(corral.ModelUnavailable, match="within the timeout of 0.2 s"):
        await client(server, timeout=0.2).complete(HELLO)
    assert server.calls == 1


async def test_a_body_that_is_not_a_completion_is_transient(server: FakeChatServer) -> None:
    server.enqueue(ChatReply(content="x", usage=(1, 1)), ChatReply.failure(200, "odd"))
    model = client(server)
    assert (await model.complete(HELLO)).content == "x"
    with pytest.raises(corral.ModelUnavailable, match="not a chat completion"):
        await model.complete(HELLO)


async def test_environment_supplies_key_and_base_url(
    server: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123")
    monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/")
    server.enqueue(ChatReply.text("a"), ChatReply.text("b"))
    assert (await OpenAICompatible("m").complete(HELLO)).content == "a"
    assert server.headers[0]["authorization"] == "Bearer sk-test-123"
    monkeypatch.delenv("OPENAI_API_KEY")
    assert (await OpenAICompatible("m").complete(HELLO)).content == "b"
    assert "authorization" not in server.headers[1]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"base_url": "ftp://example.com/v1"}, "ftp://example.com/v1"),
        ({"base_url": "localhost:8000/v1"}, "localhost:8000/v1"),
        ({"prices": {"input": 1, "cached": 0.5}}, "'cached'"),
        ({"prices": {"input": -1}}, "-1"),
        ({"timeout": 0}, "0"),
        ({"extra_body": {"messages": []}}, "'messages'"),
        # A streamed reply is not read: every call would fail as "not a chat completion".
        ({"extra_body": {"stream": True}}, "'stream'"),
        # It would replace the model each call names (a task's own): recorded as another.
        ({"extra_body": {"model": "gpt-x"}}, "'model'"),
    ],
)
def test_bad_input_is_refused_before_anything_runs(kwargs: dict[str, Any], named: str) -> None:
    kwargs = {"base_url": "http://127.0.0.1:9/v1", **kwargs}
    with pytest.raises(corral.ConfigError, match=named.replace("(", r"\(")):
        OpenAICompatible("m", **kwargs)


@pytest.mark.parametrize("key", ["max_tokens", "temperature", "seed"])
def test_extra_body_may_not_replace_what_each_call_sends(key: str) -> None:
    # Merged last, it replaced what the caller gave (and the run records as its
    # generation settings) on every request, silently.
    with pytest.raises(corral.ConfigError, match=f"{key!r}.*{key}=") as caught:
        OpenAICompatible("m", base_url="http://127.0.0.1:9/v1", extra_body={key: 1})
    assert "ToolAgent" in str(caught.value)


async def test_extra_body_may_say_stream_false(server: FakeChatServer) -> None:
    server.enqueue(ChatReply.text("a"))
    assert (await client(server, extra_body={"stream": False}).complete(HELLO)).content == "a"
    assert server.requests[0]["stream"] is False


def test_retry_after_forms() -> None:
    now = 1_000_000.0
    assert retry_after({"Retry-After": "2.5"}, now) == 2.5
    assert retry_after({"retry-after-ms": "1500", "retry-after": "9"}, now) == 1.5
    date = email.utils.formatdate(now + 12, usegmt=True)
    assert retry_after({"retry-after": date}, now) == pytest.approx(12, abs=1)
    assert retry_after({"retry-after": email.utils.formatdate(now - 60, usegmt=True)}, now) == 0
    headers = {
        "x-ratelimit-reset-requests": "2s",
        "x-ratelimit-remaining-requests": "10",
        "x-ratelimit-reset-tokens": "6m0s",
        "x-ratelimit-remaining-tokens": "0",
    }
    assert retry_after(headers, now) == 360  # only the exhausted one counts
    assert retry_after({"retry-after": "soon"}, now) is None
    unknown_zone = email.utils.formatdate(now + 5).replace("+0000", "-0000")
    assert retry_after({"retry-after": unknown_zone}, now) == pytest.approx(5, abs=1)


def test_anthropics_reset_times() -> None:
    now = datetime(2026, 12, 2, 1, 0, 0, tzinfo=UTC).timestamp()
    at = "anthropic-ratelimit-"
    requests = {at + "requests-remaining": "12", at + "requests-reset": "2026-12-02T01:00:50Z"}
    tokens = {at + "tokens-remaining": "0", at + "tokens-reset": "2026-12-02T01:00:07.5Z"}
    headers = {**requests, **tokens}
    assert retry_after(headers, now) == 7.5  # only the exhausted one counts
    assert retry_after({**headers, "retry-after": "3"}, now) == 3  # retry-after first
    past = {"anthropic-ratelimit-tokens-reset": "2026-12-02T00:59:00+00:00"}
    assert retry_after(past, now) == 0
    for bad in ("soon", "9999-99-99T00:00:00Z", "99999-01-01T00:00:00Z"):
        assert retry_after({"anthropic-ratelimit-tokens-reset": bad}, now) is None
    assert [duration(t) for t in ("20ms", "1h2m3s", "1.5", "3x", "")] == [
        0.02,
        3723,
        1.5,
        None,
        None,
    ]


async def test_a_run_opens_one_pool_sized_to_its_limits_and_closes_it(
    server: FakeChatServer,
) -> None:
    model = client(server)
    seen: list[Any] = []

    def decide(body: dict[str, Any]) -> ChatReply:
        seen.append((model._client, model.connections))
        return ChatReply.text("done")

    server._script = decide
    agent = ToolAgent(model)
    tasks = {f"t{i}": Meta("a", "e", model="x") for i in range(5)}
    runner = corral.CorralRunner(
        tasks, {"a": agent}, {"e": FakeEnvironment()}, store=corral.MemoryStore()
    )
    report = await runner.run("pool", max_parallel=4, max_parallel_by_model={"x": 3})
    assert report.counts["completed"] == 5
    clients = {id(c) for c, _ in seen}
    assert len(clients) == 1 and seen[0][0] is not None  # one pool for the run
    assert {n for _, n in seen} == {3 + 4}  # the model's limit plus the evaluations
    assert model._client is None and model.connections is None and seen[0][0].is_closed


async def test_refusal_ends_the_trial_transient_failure_retries_it(
    server: FakeChatServer,
) -> None:
    def decide(body: dict[str, Any]) -> ChatReply:
        task = body["messages"][-1]["content"]
        if task == "refused":
            return ChatReply.failure(401, "Incorrect API key provided: sk-...")
        if sum(1 for r in server.requests if r["messages"][-1]["content"] == task) == 1:
            return ChatReply.failure(502, "bad gateway")
        return ChatReply.text("fine")

    server._script = decide
    tasks = {
        "refused": Meta("a", "e", inputs={"prompt": "refused"}),
        "flaky": Meta("a", "e", inputs={"prompt": "flaky"}),
    }
    runner = corral.CorralRunner(
        tasks,
        {"a": ToolAgent(client(server))},
        {"e": FakeEnvironment()},
        store=corral.MemoryStore(),
        max_retries=3,
        backoff_base=0.0,
    )
    report = await runner.run("errors")
    refused = report.tasks["refused"].trials[0]
    assert str(refused.status) == "error" and refused.attempts == 1
    assert refused.error is not None
    assert refused.error.startswith("ModelError: HTTP 401")
    assert "Incorrect API key provided" in refused.error
    flaky = report.tasks["flaky"].trials[0]
    assert str(flaky.status) == "completed" and flaky.attempts == 2 and flaky.output == "fine"
    assert server.calls == 1 + 2


def test_fake_server_serves_plain_sync_code() -> None:
    with FakeChatServer([ChatReply.text("sync hello")]) as server:
        request = urllib.request.Request(
            server.url + "/chat/completions",
            data=json.dumps({"model": "m", "messages": HELLO}).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            body = json.loads(answer.read())
        assert body["choices"][0]["message"]["content"] == "sync hello"
        assert server.calls == 1 and server.requests[0]["messages"] == HELLO
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(server.url + "/models", data=b"{}", timeout=5)
        assert caught.value.code == 404
        # Nothing left to answer: a 500 that says so.
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(request, timeout=5)
        assert caught.value.code == 500 and b"no reply scripted" in caught.value.read()


async def test_reasoning_content_is_the_replys_reasoning(server: FakeChatServer) -> None:
    server.enqueue(ChatReply.text("4", reasoning="2 + 2 is 4."), ChatReply.text("no thoughts"))
    model = client(server)
    assert (await model.complete(HELLO)).reasoning == "2 + 2 is 4."
    assert (await model.complete(HELLO)).reasoning is None


async def test_reasoning_is_read_when_reasoning_content_is_null(server: FakeChatServer) -> None:
    # vLLM renamed reasoning_content to reasoning, the old field kept (null) for a while;
    # a present but null reasoning_content hid the reasoning the reply had.
    server.enqueue(
        HostileReply.shaped(role="assistant", content="4", reasoning_content=None, reasoning="2+2"),
        HostileReply.shaped(role="assistant", content="4", reasoning_content="old", reasoning=None),
        HostileReply.shaped(role="assistant", content="4", reasoning_content=None, reasoning=None),
    )
    model = client(server)
    assert (await model.complete(HELLO)).reasoning == "2+2"
    assert (await model.complete(HELLO)).reasoning == "old"
    assert (await model.complete(HELLO)).reasoning is None


def test_clients_share_one_tls_context_that_verifies_certificates() -> None:
    """httpx's default context, made once per process (reading the CA bundle cost 25 ms
    per client), still checks the certificate and the host name."""
    import ssl

    from corral.models import Anthropic

    made = [
        m._new_client(1)
        for m in (OpenAICompatible("m", base_url="https://a.example"), Anthropic("m"))
    ]
    contexts = {id(c._transport._pool._ssl_context) for c in made}  # type: ignore[attr-defined]
    assert len(contexts) == 1
    context = made[0]._transport._pool._ssl_context  # type: ignore[attr-defined]
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_fake_server_gives_concurrent_replies_their_own_ids() -> None:
    """Two requests answered at once (several trials calling) each carry the ids of
    their own call, as a real API's are unique: not both those of the later call."""
    first_arrived, second_arrived = threading.Event(), threading.Event()

    def script(body: dict[str, Any]) -> ChatReply:
        if body["messages"][0]["content"] == "first":
            first_arrived.set()
            assert second_arrived.wait(5)  # the first is answered after the second came
        else:
            second_arrived.set()
        return ChatReply.tools(("look", {}))

    def ask(server: FakeChatServer, text: str, out: dict[str, Any]) -> None:
        data = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})
        request = urllib.request.Request(
            server.url + "/chat/completions",
            data=data.encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=5) as answer:
            out[text] = json.loads(answer.read())

    replies: dict[str, Any] = {}
    with FakeChatServer(script) as server:
        first = threading.Thread(target=ask, args=(server, "first", replies))
        first.start()
        assert first_arrived.wait(5)  # the first is in the script before the second asks
        ask(server, "second", replies)
        first.join(5)
    ids = {
        text: (reply["id"], reply["choices"][0]["message"]["tool_calls"][0]["id"])
        for text, reply in replies.items()
    }
    assert ids == {
        "first": ("chatcmpl-fake1", "call_fake1_0"),
        "second": ("chatcmpl-fake2", "call_fake2_0"),
    }


def test_a_closed_fake_server_answers_no_kept_alive_connection() -> None:
    """Closing the server ends its connections too, as an endpoint going down does:
    a client's pooled connection is not answered after `close` (nor its thread kept)."""
    body = json.dumps({"model": "m", "messages": HELLO})
    headers = {"content-type": "application/json"}
    with FakeChatServer([ChatReply.text("one"), ChatReply.text("two")]) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("POST", "/v1/chat/completions", body, headers)
        assert (
            json.loads(connection.getresponse().read())["choices"][0]["message"]["content"] == "one"
        )
    with pytest.raises(OSError):  # reset, or closed before any answer
        connection.request("POST", "/v1/chat/completions", body, headers)
        connection.getresponse().read()
    connection.close()
    assert server.calls == 1


def test_a_closed_fake_server_leaves_no_thread_running() -> None:
    """`close` returns once the server's threads have ended (its serving loop, and the
    one that answered a kept-alive connection): a test's threads do not pile up."""
    body = json.dumps({"model": "m", "messages": HELLO})
    headers = {"content-type": "application/json"}
    before = set(threading.enumerate())
    with FakeChatServer([ChatReply.text("one")]) as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("POST", "/v1/chat/completions", body, headers)
        assert connection.getresponse().read()
    left = [t for t in threading.enumerate() if t not in before]
    connection.close()
    assert left == []


def _asked(*ids: str) -> dict[str, Any]:
    calls = [
        {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def _answer(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "42"}


@pytest.mark.parametrize(
    ("messages", "why"),
    [
        # A tool message answering no call of the assistant turn before it.
        ([*HELLO, _asked("call_a"), _answer("call_b")], "'call_b' not found"),
        ([*HELLO, _answer("call_a")], "must be a response to a preceeding message"),
        ([*HELLO, _asked("call_a"), _answer("call_a"), _answer("call_a")], "'call_a' not found"),
        # A tool call no tool message answers.
        ([*HELLO, _asked("call_a", "call_b"), _answer("call_a")], "call_b"),
        ([*HELLO, _asked("call_a"), {"role": "user", "content": "and?"}], "call_a"),
    ],
    ids=["other-id", "no-call", "twice", "one-unanswered", "user-between"],
)
async def test_the_fake_refuses_what_the_api_refuses(
    server: FakeChatServer, messages: list[dict[str, Any]], why: str
) -> None:
    # The real API answers these 400; a lax fake hid a client that sent them.
    with pytest.raises(corral.ModelError, match=re.escape(why)) as caught:
        await client(server).complete(messages)
    assert getattr(caught.value, "status_code", None) == 400
    assert server.calls == 0
    server.enqueue(ChatReply.text("ok"))
    answered = [*HELLO, _asked("call_a", "call_b"), _answer("call_b"), _answer("call_a")]
    assert (await client(server).complete(answered)).content == "ok"


#: What OpenAI answers a reasoning model (o1, o3, o4-mini, gpt-5) asked with max_tokens.
UNSUPPORTED_MAX_TOKENS = (
    "Unsupported parameter: 'max_tokens' is not supported with this model. "
    "Use 'max_completion_tokens' instead."
)


async def test_a_reasoning_model_gets_the_calls_limit_as_max_completion_tokens() -> None:
    # A reasoning model refuses max_tokens; the only way to send it another field was
    # extra_body, which the run does not record (and both were then sent).
    with FakeChatServer(reasoning_models=("o3",)) as server:
        with pytest.raises(corral.ModelError, match=re.escape(UNSUPPORTED_MAX_TOKENS)) as caught:
            await client(server).complete(HELLO, model="o3", max_tokens=64)
        assert getattr(caught.value, "status_code", None) == 400 and server.calls == 0
        server.enqueue(ChatReply.text("fine"), ChatReply.text("also"))
        assert (await client(server).complete(HELLO, model="gpt-4o")).content == "fine"

        model = client(server, token_limit_field="max_completion_tokens")
        assert model.token_limit_field == "max_completion_tokens"
        assert (await model.complete(HELLO, model="o3", max_tokens=64)).content == "also"
        sent = server.requests[-1]
        assert sent["max_completion_tokens"] == 64 and "max_tokens" not in sent
        server.enqueue(ChatReply.text("unbounded"))
        assert (await model.complete(HELLO, model="o3")).content == "unbounded"
        assert "max_completion_tokens" not in server.requests[-1]


async def test_a_tool_agent_run_on_a_reasoning_model_records_its_limit() -> None:
    with FakeChatServer([ChatReply.text("done")], reasoning_models=("o4-mini",)) as server:
        model = OpenAICompatible(
            "o4-mini", base_url=server.url, token_limit_field="max_completion_tokens"
        )
        runner = corral.CorralRunner(
            {"t": Meta("a", "e")},
            {"a": ToolAgent(model, max_tokens=2048)},
            {"e": FakeEnvironment()},
            store=corral.MemoryStore(),
        )
        report = await runner.run("reasoning")
    assert report.counts["completed"] == 1
    assert server.requests[0]["max_completion_tokens"] == 2048
    assert "max_tokens" not in server.requests[0]
    assert report.generation["a"]["max_tokens"] == 2048


@pytest.mark.parametrize("field", ["max_completion_tokens", "max_output_tokens", "", None, 3])
def test_a_token_limit_field_that_is_not_one_the_api_reads_is_refused(field: object) -> None:
    if field == "max_completion_tokens":  # the one besides max_tokens the API reads
        assert OpenAICompatible("m", base_url="http://127.0.0.1:9/v1", token_limit_field=field)
        return
    with pytest.raises(corral.ConfigError, match=re.escape(f"token_limit_field={field!r}")):
        OpenAICompatible("m", base_url="http://127.0.0.1:9/v1", token_limit_field=field)


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
@pytest.mark.parametrize("key", ["max_tokens", "max_completion_tokens"])
def test_extra_body_may_not_set_the_token_limit_in_either_field(key: str, field: str) -> None:
    # Merged last, it sent a limit the run does not record, beside (or over) the
    # call's own: the API refuses a request with both fields.
    with pytest.raises(corral.ConfigError, match=f"{key!r}") as caught:
        OpenAICompatible(
            "m",
            base_url="http://127.0.0.1:9/v1",
            token_limit_field=field,
            extra_body={key: 100},
        )
    assert "ToolAgent(max_tokens=...)" in str(caught.value)
    assert "token_limit_field" in str(caught.value)


async def test_max_connections_bounds_a_clients_requests_in_flight(server: FakeChatServer) -> None:
    """Inspect's max_connections: at most N requests of the client at once, the rest
    waiting in its concurrency scope (first come, first served), whatever calls them."""
    release, lock = threading.Event(), threading.Lock()
    state = {"now": 0, "peak": 0}

    def decide(body: dict[str, Any]) -> ChatReply:
        with lock:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
        release.wait(30)
        with lock:
            state["now"] -= 1
        return ChatReply.text("ok")

    server._script = decide
    model = client(server, max_connections=2)
    assert model.connection_scope is not None
    replies: list[str | None] = []

    async def call() -> None:
        replies.append((await model.complete(HELLO)).content)

    async with model, anyio.create_task_group() as tg:
        for _ in range(5):
            tg.start_soon(call)
        await anyio.wait_all_tasks_blocked()
        scope = corral.ConcurrencyScopes.current().statistics()[model.connection_scope]
        assert (scope.limit, scope.in_use, scope.waiting) == (2, 2, 3)
        release.set()
    assert replies == ["ok"] * 5 and state["peak"] <= 2


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_max_connections_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(corral.ConfigError, match="max_connections"):
        OpenAICompatible("m", base_url="http://127.0.0.1:9/v1", max_connections=bad)  # type: ignore[arg-type]


async def test_a_runs_trials_and_scorer_share_its_max_connections(server: FakeChatServer) -> None:
    server._script = lambda body: ChatReply.text("done")
    model = client(server, max_connections=1)
    tasks = {f"t{i}": Meta("a", "e") for i in range(6)}
    runner = corral.CorralRunner(
        tasks, {"a": ToolAgent(model)}, {"e": FakeEnvironment()}, store=corral.MemoryStore()
    )
    scopes = corral.ConcurrencyScopes()
    report = await runner.run("bounded", max_parallel=4, scopes=scopes)
    assert report.counts["completed"] == 6
    used = scopes.statistics()[str(model.connection_scope)]
    assert (used.limit, used.peak, used.in_use) == (1, 1, 0)


class AsksOnce:
    """An agent that asks its model once (recorded through ``session.chat``) and ends."""

    def __init__(self, model: corral.ChatModel) -> None:
        self.model = model

    async def act(self, session: corral.AgentSession) -> corral.Final:
        reply = await session.chat(self.model).complete(HELLO)
        return corral.Final(reply.content)


#: Seconds the test holds the client's only connection slot while the trial's call waits.
HELD = 0.5


async def test_a_calls_latency_leaves_out_its_wait_for_a_connection_slot(
    server: FakeChatServer,
) -> None:
    """The recorded latency is the request's (from sending it to reading the reply), as
    the report's mean latency says: a wait for a max_connections slot before it is
    queueing (the trial's working time), not the endpoint's latency. (The sleep is the
    queue the call stands in, not a wait for something to happen.)"""
    server._script = lambda body: ChatReply.text("ok")
    model = client(server, max_connections=1)
    assert model.connection_scope is not None
    store = corral.MemoryStore()
    runner = corral.CorralRunner(
        {"t": Meta("a", "e")}, {"a": AsksOnce(model)}, {"e": FakeEnvironment()}, store=store
    )
    scopes = corral.ConcurrencyScopes()
    slot = scopes.scope(model.connection_scope, 1)
    await slot.acquire()  # another request of the model holds the only slot
    async with anyio.create_task_group() as tg:
        tg.start_soon(functools.partial(runner.run, "queued", scopes=scopes))
        while slot.statistics().waiting == 0:
            await anyio.wait_all_tasks_blocked()
        await anyio.sleep(HELD)
        slot.release()
    history = await store.history(corral.TrialKey("queued", "t", 0))
    (call,) = [decode(c) for c in history if c.kind == "model_call"]
    assert isinstance(call, ModelCallPayload) and call.text == "ok"
    assert call.latency is not None and 0 < call.latency < HELD


class Replays:
    """A user's model that answers from replies kept from an earlier run (a cache): each
    carries the latency its request took then, which this call did not wait."""

    model = "replayed"

    async def complete(self, messages: Any, **options: Any) -> ChatResponse:
        return ChatResponse("ok", latency=KEPT)


#: Seconds a kept reply's request took when it was first asked.
KEPT = 30.0


async def test_a_replayed_replys_latency_is_not_recorded_as_this_calls() -> None:
    """A call's recorded latency is never longer than the call took (its caller's
    timing): a reply kept from an earlier request, answered at once, carries that
    request's latency, which this call never waited (the trial's and a scorer's)."""
    store = corral.MemoryStore()
    runner = corral.CorralRunner(
        {"t": Meta("a", "e")}, {"a": AsksOnce(Replays())}, {"e": FakeEnvironment()}, store=store
    )
    await runner.run("replayed")
    history = await store.history(corral.TrialKey("replayed", "t", 0))
    (call,) = [decode(c) for c in history if c.kind == "model_call"]
    assert isinstance(call, ModelCallPayload) and call.text == "ok"
    _, scored = await exact().ask(Replays(), HELLO)
    for latency in (call.latency, scored.latency):
        assert latency is not None and latency < KEPT


@pytest.mark.parametrize("make", [OpenAICompatible, Anthropic])
def test_max_connections_scope_never_shows_the_base_urls_credentials(make: Any) -> None:
    """The scope's name is shown (progress display, statistics, a ConfigError recorded
    as a trial's error): a base URL's user and password are not part of it."""
    model = make("m", base_url="https://user:s3cret@api.example.com:8443/v1", max_connections=2)
    assert model.connection_scope == "requests m @ api.example.com:8443"


async def test_two_clients_of_one_endpoint_share_one_max_connections(
    server: FakeChatServer,
) -> None:
    """Same limit: one bound for both. Another limit: a ConfigError that says which
    setting clashes (not only an internal scope's name) and how to mend it."""
    server._script = lambda body: ChatReply.text("ok")
    first, same = client(server, max_connections=2), client(server, max_connections=2)
    await first.complete(HELLO)
    await same.complete(HELLO)
    assert first.connection_scope == same.connection_scope
    with pytest.raises(corral.ConfigError) as caught:
        await client(server, max_connections=3).complete(HELLO)
    message = str(caught.value)
    assert "max_connections=3" in message and "max_connections" in message.split("=3", 1)[1]
    assert "the same max_connections" in message


def test_max_connections_scope_is_one_per_endpoint_however_its_url_is_spelled() -> None:
    """A host's case and its scheme's own port do not make another endpoint: clients of
    one model there share one bound."""
    names = {
        OpenAICompatible("m", base_url=url, max_connections=2).connection_scope
        for url in (
            "https://api.example.com/v1",
            "https://API.Example.com/v1",
            "https://api.example.com:443/v1",
        )
    }
    assert names == {"requests m @ api.example.com"}
    other = OpenAICompatible("m", base_url="http://[::1]:8080/v1", max_connections=2)
    assert other.connection_scope == "requests m @ [::1]:8080"


async def test_a_base_urls_password_is_never_shown_nor_recorded(server: FakeChatServer) -> None:
    """A gateway's base URL with credentials (https://user:pass@host/v1): its password
    was in the client's repr, in every error message (kept as a trial's error) and in
    each model call's recorded endpoint."""
    secret = "s3cret-pw"
    with_password = server.url.replace("http://", f"http://user:{secret}@")
    server._script = lambda body: ChatReply.text("done")
    model = OpenAICompatible("m", base_url=with_password)
    assert secret not in repr(model)
    store = corral.MemoryStore()
    runner = corral.CorralRunner(
        {"t": Meta("a", "e")}, {"a": ToolAgent(model)}, {"e": FakeEnvironment()}, store=store
    )
    report = await runner.run("pw")
    async with store.opened():
        history = await store.history(corral.TrialKey("pw", "t", 0))
        runs = await store.runs("pw")
    assert history and all(secret not in json.dumps(c.payload, default=str) for c in history)
    # Nor in the run's record of its agent's generation settings (in the report too).
    assert runs and all(secret not in repr(run) for run in runs)
    assert report.generation["a"]["base_url"].startswith("http://user:***@")
    refused = OpenAICompatible("m", base_url=f"http://user:{secret}@127.0.0.1:9/v1", timeout=5)
    with pytest.raises(corral.ModelUnavailable) as caught:
        await refused.complete(HELLO)
    assert secret not in str(caught.value) and "user:***@127.0.0.1:9" in str(caught.value)


async def test_a_password_after_a_user_that_is_an_email_is_masked_too(
    server: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user with an '@' of its own (https://me@corp.com:pass@host/v1, as httpx reads
    it: the user info ends at the last '@'): its password was shown whole, in the repr,
    each error message and each call's recorded endpoint."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    secret = "s3cret-pw"
    base = server.url.replace("http://", f"http://me@corp.com:{secret}@")
    server.enqueue(ChatReply.text("done"))
    model = OpenAICompatible("m", base_url=base)
    assert secret not in repr(model) and secret not in model.shown_url
    assert model.shown_url.startswith("http://me@corp.com:***@127.0.0.1:")
    assert (await model.complete(HELLO)).content == "done"
    # The request still carries the credentials: httpx sends them as basic auth.
    sent = base64.b64encode(f"me@corp.com:{secret}".encode()).decode()
    assert server.headers[0]["authorization"] == f"Basic {sent}"
