"""`corral.models.Anthropic` over real HTTP on 127.0.0.1 against `FakeAnthropicServer`:
the request it sends, the reply it reads (text, thinking, tool use, cache usage
and cost), errors by status, and a `ToolAgent` trial end to end."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

import httpx
import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.history import ModelCallPayload, decode
from corral.models import Anthropic
from corral.models._anthropic import MAX_CONTINUATIONS
from corral.testing import ChatReply, FakeAnthropicServer, HostileReply, thinking_signature

from ..support.tool_bench import Ledger, Notes, balance_of

pytestmark = pytest.mark.anyio

HELLO = [{"role": "user", "content": "hello"}]
TOOL = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "The ledger id of an account.",
        "parameters": {"type": "object", "properties": {"account": {"type": "integer"}}},
    },
}


@pytest.fixture
def server() -> Iterator[FakeAnthropicServer]:
    with FakeAnthropicServer() as fake:
        yield fake


def client(server: FakeAnthropicServer, **kwargs: Any) -> Anthropic:
    return Anthropic("claude-test", base_url=server.url, **{"api_key": "sk-ant-test", **kwargs})


async def test_the_request_speaks_the_messages_api(server: FakeAnthropicServer) -> None:
    server.enqueue(ChatReply.text("hi"))
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "look up 7"},
        {
            "role": "assistant",
            "content": "Looking.",
            "tool_calls": [
                {"id": "call_a", "function": {"name": "lookup", "arguments": '{"account": 7}'}},
                {"id": "call_b", "function": {"name": "lookup", "arguments": "not json"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "L7"},
        {"role": "tool", "tool_call_id": "call_b", "content": "error: bad arguments"},
    ]
    response = await client(server).complete(
        messages, tools=[TOOL], temperature=0.5, seed=3, model="claude-other"
    )
    assert response.content == "hi"
    (body,) = server.requests
    assert body["model"] == "claude-other" and body["max_tokens"] == 4096
    assert body["system"] == "Be brief." and body["temperature"] == 0.5
    assert "seed" not in body  # the Messages API has none
    assert body["tools"] == [
        {
            "name": "lookup",
            "description": "The ledger id of an account.",
            "input_schema": TOOL["function"]["parameters"],
        }
    ]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "look up 7"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking."},
                {"type": "tool_use", "id": "call_a", "name": "lookup", "input": {"account": 7}},
                {
                    "type": "tool_use",
                    "id": "call_b",
                    "name": "lookup",
                    "input": {"arguments": "not json"},
                },
            ],
        },
        {  # both results in one user turn
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": "L7"},
                {"type": "tool_result", "tool_use_id": "call_b", "content": "error: bad arguments"},
            ],
        },
    ]
    headers = server.headers[0]
    assert headers["x-api-key"] == "sk-ant-test" and headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers


async def test_thinking_tool_use_and_cache_usage_with_cost(server: FakeAnthropicServer) -> None:
    server.enqueue(
        ChatReply(
            content="Two lookups.",
            tool_calls=(("lookup", {"account": 1}), ("lookup", {"account": 2})),
            reasoning="Both accounts are needed.",
            usage=(100, 20),
            cache=(1000, 200),
        )
    )
    prices = {"input": 3.0, "output": 15.0}
    response = await client(server, prices=prices).complete(HELLO, tools=[TOOL])
    assert response.content == "Two lookups."
    assert response.reasoning == "Both accounts are needed."
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        ("lookup", {"account": 1}),
        ("lookup", {"account": 2}),
    ]
    assert response.finish_reason == "tool_use"
    assert response.cache_read_tokens == 1000 and response.cache_write_tokens == 200
    assert response.usage.input_tokens == 100 + 1000 + 200 and response.usage.output_tokens == 20
    # A cache read costs 0.1 and a write 1.25 times an input token unless priced.
    expected = (100 * 3.0 + 1000 * 0.3 + 200 * 3.75 + 20 * 15.0) / 1e6
    assert response.usage.cost == pytest.approx(expected)
    priced = {**prices, "cache_read": 1.0, "cache_write": 2.0}
    server.enqueue(ChatReply(content="x", usage=(10, 1), cache=(100, 100)))
    response = await client(server, prices=priced).complete(HELLO)
    assert response.usage.cost == pytest.approx((10 * 3 + 100 * 1 + 100 * 2 + 15) / 1e6)


class HourCache(FakeAnthropicServer):
    """Anthropic's usage with its cache writes by lifetime (``cache_control``'s ``ttl``)."""

    def render(self, request: Mapping[str, Any], reply: ChatReply, number: int) -> bytes:
        body = json.loads(super().render(request, reply, number))
        written = body["usage"]["cache_creation_input_tokens"]
        hour = min(150, written)
        lives = {"ephemeral_5m_input_tokens": written - hour, "ephemeral_1h_input_tokens": hour}
        body["usage"]["cache_creation"] = lives
        return json.dumps(body).encode()


async def test_an_hours_cache_write_costs_twice_an_input_token() -> None:
    with HourCache([ChatReply(content="x", usage=(100, 20), cache=(0, 200))] * 2) as server:
        prices = {"input": 3.0, "output": 15.0}
        response = await client(server, prices=prices).complete(HELLO)
        assert response.cache_write_tokens == 200
        # 50 written for 5 minutes (1.25 times an input token), 150 for an hour (2 times).
        expected = (100 * 3.0 + 50 * 3.75 + 150 * 6.0 + 20 * 15.0) / 1e6
        assert response.usage.cost == pytest.approx(expected)
        priced = {**prices, "cache_write": 4.0, "cache_write_1h": 7.0}
        response = await client(server, prices=priced).complete(HELLO)
        assert response.usage.cost == pytest.approx((300 + 50 * 4.0 + 150 * 7.0 + 300) / 1e6)


async def test_the_reply_goes_back_as_it_came_thinking_signed(
    server: FakeAnthropicServer,
) -> None:
    server.enqueue(ChatReply.tools(("lookup", {"account": 1}), reasoning="think"))
    server.enqueue(ChatReply.text("done"))
    model = client(server)
    first = await model.complete(HELLO, tools=[TOOL])
    call = first.tool_calls[0]
    answer = {"role": "tool", "tool_call_id": call.id, "content": "L1"}
    second = await model.complete([*HELLO, dict(first.message), answer])
    assert second.content == "done"
    assistant = server.requests[1]["messages"][1]
    assert assistant["content"][0] == {
        "type": "thinking",
        "thinking": "think",
        "signature": thinking_signature("think"),
    }


async def test_environment_supplies_key_and_base_url(
    server: FakeAnthropicServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "from-env")
    server.enqueue(ChatReply.text("a"))
    model = Anthropic("m", version="2024-01-01", beta=["feature-a", "feature-b"])
    assert (await model.complete(HELLO)).content == "a"
    headers = server.headers[0]
    assert headers["x-api-key"] == "from-env" and headers["anthropic-version"] == "2024-01-01"
    assert headers["anthropic-beta"] == "feature-a,feature-b"
    monkeypatch.delenv("ANTHROPIC_BASE_URL")
    assert Anthropic("m").url == "https://api.anthropic.com/v1/messages"


#: Anthropic's rate limit headers of an account whose token bucket reads as empty.
EXHAUSTED = {
    "anthropic-ratelimit-requests-remaining": "49",
    "anthropic-ratelimit-requests-reset": "2099-01-01T00:00:01Z",
    "anthropic-ratelimit-tokens-remaining": "0",
    "anthropic-ratelimit-tokens-reset": "2099-01-01T00:00:30Z",
}


@pytest.mark.parametrize(
    ("reply", "error", "wait"),
    [
        (ChatReply.rate_limited(7), corral.RateLimited, 7.0),
        (ChatReply.failure(529, "Overloaded"), corral.ModelUnavailable, None),
        (ChatReply.failure(529, "Overloaded", headers={"retry-after": "3"}), corral.RateLimited, 3),
        # The account's limits (sent with every answer, their token count rounded to
        # thousands) do not say how long an overload lasts: retried, not a rate limit.
        (ChatReply.failure(529, "Overloaded", headers=EXHAUSTED), corral.ModelUnavailable, None),
        (ChatReply.failure(500, "Internal"), corral.ModelUnavailable, None),
        (ChatReply.failure(401, "invalid x-api-key"), corral.ModelError, None),
        (ChatReply.failure(400, "prompt is too long"), corral.ModelError, None),
    ],
    ids=["429", "529", "529-retry-after", "529-account-limits", "500", "401", "400"],
)
async def test_errors_by_status(
    server: FakeAnthropicServer, reply: ChatReply, error: type[Exception], wait: float | None
) -> None:
    server.enqueue(reply)
    with pytest.raises(error) as caught:
        await client(server).complete(HELLO)
    assert f"HTTP {reply.status} from {server.url}/v1/messages: {reply.error}" in str(caught.value)
    if isinstance(caught.value, corral.RateLimited):
        assert caught.value.retry_after == wait
    else:
        assert getattr(caught.value, "status_code", None) == reply.status


async def test_the_fake_refuses_what_the_api_refuses(server: FakeAnthropicServer) -> None:
    model = client(server)
    call = {"id": "call_a", "function": {"name": "lookup", "arguments": "{}"}}
    asked = {"role": "assistant", "content": None, "tool_calls": [call]}
    unanswered = [*HELLO, asked, {"role": "user", "content": "and?"}]
    with pytest.raises(corral.ModelError, match="tool_use ids without tool_result"):
        await model.complete(unanswered)
    async with httpx.AsyncClient() as raw:
        unbound = model.request_body(HELLO)
        del unbound["max_tokens"]  # the client always sends one
        no_bound = await raw.post(
            server.url + "/v1/messages", json=unbound, headers={"anthropic-version": "1"}
        )
        assert no_bound.status_code == 400
        assert "max_tokens" in no_bound.json()["error"]["message"]
        for content in (b"[1, 2]", b"{"):
            answer = await raw.post(server.url + "/v1/messages", content=content)
            assert answer.status_code == 400
            assert answer.json()["error"]["type"] == "invalid_request_error"
        missing = await raw.post(server.url + "/v1/messages", json={"messages": []})
        assert "anthropic-version" in missing.json()["error"]["message"]
    assert server.calls == 0  # refused before any reply was scripted


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"model": ""}, "model"),
        ({"base_url": "ftp://x"}, "base_url"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"prices": {"cached": 1}}, "prices"),
        ({"prices": {"cache_read": -1}}, "cache_read"),
        ({"extra_body": {"system": "x"}}, "system"),
        # As OpenAICompatible's: a model of its own would replace each call's (a task's),
        # and a stream of events is no reply it reads (every call failed, retried).
        ({"extra_body": {"model": "claude-x"}}, "'model'"),
        ({"extra_body": {"stream": True}}, "'stream'"),
        ({"version": ""}, "version"),
        ({"beta": "one"}, "beta"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_bad_settings_are_refused(kwargs: dict[str, Any], named: str) -> None:
    settings = {"model": "m", "base_url": "http://127.0.0.1:9", **kwargs}
    with pytest.raises(corral.ConfigError, match=named):
        Anthropic(**settings)


@pytest.mark.parametrize(
    ("key", "instead"),
    [("max_tokens", "Anthropic(max_tokens=...)"), ("temperature", "temperature=")],
)
def test_extra_body_may_not_replace_what_each_call_sends(key: str, instead: str) -> None:
    # Merged last, it replaced the bound and temperature the caller gave (and that the
    # run records as its generation settings) on every request, silently.
    with pytest.raises(corral.ConfigError, match=re.escape(f"{key!r}")) as caught:
        Anthropic("m", base_url="http://127.0.0.1:9", extra_body={key: 1})
    assert instead in str(caught.value)


def test_a_message_the_api_cannot_take_is_refused() -> None:
    model = Anthropic("m", base_url="http://127.0.0.1:9", api_key="")
    with pytest.raises(corral.ConfigError, match="role 'function'"):
        model.request_body([{"role": "function", "content": "x"}])
    cached = {"type": "text", "text": "cached", "cache_control": {}}
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}
    body = model.request_body(
        [{"role": "system", "content": [cached]}, {"role": "user", "content": [image]}]
    )
    assert body["system"] == [{"type": "text", "text": "cached", "cache_control": {}}]
    assert body["messages"][0]["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAA"}}
    ]


def test_text_parts_place_the_text_only_while_they_are_its_content() -> None:
    model = Anthropic("m", base_url="http://127.0.0.1:9", api_key="")
    call = {"id": "call_a", "function": {"name": "lookup", "arguments": "{}"}}
    turn = {"role": "assistant", "content": "Ab", "tool_calls": [call], "text_parts": ["A", "b"]}
    answer = {"role": "tool", "tool_call_id": "call_a", "content": "L1"}

    def sent(message: dict[str, Any]) -> list[Any]:
        body = model.request_body([{"role": "user", "content": "go"}, message, answer])
        return [b.get("text", b["type"]) for b in body["messages"][1]["content"]]

    assert sent(turn) == ["A", "tool_use", "b"]
    assert sent({**turn, "content": "Edited"}) == ["Edited", "tool_use"]  # the agent's text
    with pytest.raises(corral.ConfigError, match="text_parts"):
        sent({**turn, "text_parts": "Ab"})


def ledger_in_messages(body: dict[str, Any]) -> ChatReply:
    """`tool_bench.ledger_model` on Messages API requests: both lookups of a two-account
    task at once (parallel tool use), then each balance, then the sum."""
    last = body["messages"][-1]["content"]
    results = [b for b in last if b["type"] == "tool_result"]
    if not results:
        inputs = json.loads(last[0]["text"].split("Inputs:\n", 1)[1])
        calls = [("lookup", {"account": a}) for a in inputs["accounts"]]
        return ChatReply.tools(*calls, reasoning="Two accounts: look both up.", usage=(50, 10))
    values = [json.loads(r["content"]) for r in results]
    if all(isinstance(v, dict) for v in values):
        return ChatReply.tools(*[("balance", {"ledger": v["ledger"]}) for v in values])
    return ChatReply.text(str(sum(values)), usage=(100, 3), reasoning="Add them.")


async def test_a_tool_agent_trial_end_to_end(server: FakeAnthropicServer) -> None:
    server._script = ledger_in_messages
    model = client(server, prices={"input": 3.0, "output": 15.0})
    agent = ToolAgent(model, "Answer with the total balance.", parse_final=int)
    tasks = {
        "pair": Meta(
            "teller", "ledger", model="claude-test", inputs={"prompt": "Sum", "accounts": [3, 4]}
        )
    }

    class Summed(Ledger):
        async def evaluate(self, trial: corral.TrialRecord) -> corral.Evaluation:
            passed = trial.output == balance_of(3) + balance_of(4)
            return corral.Evaluation(float(passed), passed)

    runner = corral.CorralRunner(
        tasks, {"teller": agent}, {"ledger": Summed()}, store=corral.MemoryStore()
    )
    report = await runner.run("anthropic")
    record = report.tasks["pair"].trials[0]
    assert str(record.status) == "completed" and record.passed, record.error
    assert server.calls == 3
    assert all(r["system"] == "Answer with the total balance." for r in server.requests)
    assert {t["name"] for t in server.requests[0]["tools"]} == {"lookup", "balance"}
    assert record.usage.input_tokens > 0 and record.usage.cost > 0
    assert model.connections is None  # the run's pool is closed


class Interleaving(FakeAnthropicServer):
    """Its first reply says something before each of its two tool calls, as Claude may."""

    def render(self, request: Mapping[str, Any], reply: ChatReply, number: int) -> bytes:
        body = json.loads(super().render(request, reply, number))
        if number == 1:
            first, second = body["content"]
            said = [{"type": "text", "text": "First 3."}, {"type": "text", "text": "Then 4."}]
            body["content"] = [said[0], first, said[1], second]
        return json.dumps(body).encode()


async def test_text_between_tool_calls_goes_back_where_the_model_wrote_it() -> None:
    calls = (("lookup", {"account": 3}), ("lookup", {"account": 4}))
    with Interleaving([ChatReply.tools(*calls), ChatReply.text("7")]) as server:
        agent = ToolAgent(client(server), "Look them up.", parse_final=int)
        tasks = {"pair": Meta("teller", "ledger", model="claude-test", inputs={"prompt": "Go"})}
        store = corral.MemoryStore()
        runner = corral.CorralRunner(tasks, {"teller": agent}, {"ledger": Ledger()}, store=store)
        report = await runner.run("interleaved")
    assert report.tasks["pair"].trials[0].output == 7
    async with store.opened():
        history = await store.history(corral.TrialKey("interleaved", "pair", 0))
    reply = next(decode(c) for c in history if c.kind == "model_call")
    assert isinstance(reply, ModelCallPayload)  # the record says where the text stood
    assert reply.text == "First 3.Then 4." and reply.text_parts == ("First 3.", "Then 4.", "")
    turn = server.requests[1]["messages"][1]
    assert turn["role"] == "assistant"
    said = [(b["type"], b.get("text") or b["input"]) for b in turn["content"]]
    # Not "First 3.Then 4." before both calls: the model never wrote that.
    assert said == [
        ("text", "First 3."),
        ("tool_use", {"account": 3}),
        ("text", "Then 4."),
        ("tool_use", {"account": 4}),
    ]


async def test_text_of_whitespace_only_is_never_sent(server: FakeAnthropicServer) -> None:
    # The real API: 400 "messages: text content blocks must contain non-whitespace text".
    async with httpx.AsyncClient() as raw:
        blank = {"role": "user", "content": [{"type": "text", "text": " \n"}]}
        body = {"model": "m", "max_tokens": 8, "messages": [blank]}
        headers = {"anthropic-version": "2023-06-01"}
        answer = await raw.post(server.url + "/v1/messages", json=body, headers=headers)
        assert answer.status_code == 400
        assert "non-whitespace text" in answer.json()["error"]["message"]
    # Claude may write only a line break before its tool call: the reply's text, which
    # the next turn sends back (as ToolAgent does), without that block.
    server.enqueue(ChatReply.tools(("lookup", {"account": 1}), content="\n\n"))
    server.enqueue(ChatReply.text("done"))
    model = client(server)
    first = await model.complete(HELLO, tools=[TOOL])
    assert first.content == "\n\n"
    call = first.tool_calls[0]
    turn = {
        "role": "assistant",
        "content": first.content,
        "tool_calls": [{"id": call.id, "function": {"name": call.name, "arguments": "{}"}}],
    }
    answer_turn = {"role": "tool", "tool_call_id": call.id, "content": "L1"}
    second = await model.complete([*HELLO, turn, answer_turn], tools=[TOOL])
    assert second.content == "done"
    assert [b["type"] for b in server.requests[1]["messages"][1]["content"]] == ["tool_use"]
    assert model.request_body([{"role": "system", "content": "  "}, *HELLO]).get("system") is None


async def test_an_assistant_turn_of_whitespace_only_is_not_sent_empty(
    server: FakeAnthropicServer,
) -> None:
    # The real API: 400 "messages.1: all messages must have non-empty content except for
    # the optional final assistant message".
    async with httpx.AsyncClient() as raw:
        empty = {"role": "assistant", "content": []}
        messages = [HELLO[0], empty, {"role": "user", "content": "go on"}]
        body = {"model": "m", "max_tokens": 8, "messages": messages}
        headers = {"anthropic-version": "2023-06-01"}
        answer = await raw.post(server.url + "/v1/messages", json=body, headers=headers)
        assert answer.status_code == 400
        assert "non-empty content" in answer.json()["error"]["message"]
    # A reply of only a line break (or of nothing), sent back with the next user turn:
    # the turn that said nothing is left out, and the user's turns are one.
    server.enqueue(ChatReply.text("done"))
    server.enqueue(ChatReply.text("done"))
    model = client(server)
    for said in ("\n\n", ""):
        turns = [
            *HELLO,
            {"role": "assistant", "content": said},
            {"role": "user", "content": "go on"},
        ]
        assert (await model.complete(turns)).content == "done"
        sent = server.requests[-1]["messages"]
        assert [m["role"] for m in sent] == ["user"]
        assert [b["text"] for b in sent[0]["content"]] == ["hello", "go on"]


class CutOff(FakeAnthropicServer):
    """Its first reply runs out of tokens in its tool call: the API sends the
    ``tool_use`` block with the input it had finished (its parameters are buffered
    whole, so what is cut is missing) and stop_reason ``max_tokens``."""

    def render(self, request: Mapping[str, Any], reply: ChatReply, number: int) -> bytes:
        body = json.loads(super().render(request, reply, number))
        if number == 1:
            body["stop_reason"] = "max_tokens"
        return json.dumps(body).encode()


async def test_a_tool_call_cut_off_at_max_tokens_is_not_run() -> None:
    # "text" was being written when the reply hit max_tokens: the call is incomplete.
    cut = ChatReply.tools(("write", {"path": "notes.txt"}), content="Writing it.")
    env = Notes()
    with CutOff([cut, ChatReply.text("done")]) as server:
        runner = corral.CorralRunner(
            {"t": Meta("a", "e")},
            {"a": ToolAgent(client(server), max_tokens=64)},
            {"e": env},
            store=corral.MemoryStore(),
        )
        report = await runner.run("cut")
    trial = report.tasks["t"].trials[0]
    assert str(trial.status) == "completed" and trial.output == "done", trial.error
    assert env.written == []  # never run with half its input
    (result,) = [b for b in server.requests[1]["messages"][-1]["content"]]
    assert result["type"] == "tool_result" and result["content"].startswith("error:")
    assert "max_tokens" in result["content"]


#: A reply whose server tool's loop hit its limit: the turn is paused, not over.
PAUSED = {
    "id": "msg_paused",
    "type": "message",
    "role": "assistant",
    "model": "claude-test",
    "content": [
        {"type": "text", "text": "Let me search."},
        {
            "type": "server_tool_use",
            "id": "srvtoolu_1",
            "name": "web_search",
            "input": {"query": "answer"},
        },
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
    ],
    "stop_reason": "pause_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 10},
}


async def test_a_paused_turn_is_continued_not_taken_for_the_answer(
    server: FakeAnthropicServer,
) -> None:
    server.enqueue(HostileReply.raw(PAUSED), ChatReply.text(" It is 42.", usage=(130, 5)))
    model = client(server, prices={"input": 1.0, "output": 2.0})
    response = await model.complete(HELLO)
    assert server.calls == 2  # the paused content sent back, as the API asks
    assert server.requests[1]["messages"] == [
        *server.requests[0]["messages"],
        {"role": "assistant", "content": PAUSED["content"]},
    ]
    assert response.finish_reason == "end_turn"
    assert response.content == "Let me search. It is 42."
    assert response.message["content"] == [
        *PAUSED["content"],
        {"type": "text", "text": " It is 42."},
    ]
    # Both requests are counted and priced.
    assert (response.usage.input_tokens, response.usage.output_tokens) == (240, 25)
    assert response.cache_read_tokens == 10
    assert response.usage.cost == pytest.approx((100 + 1 + 130 + 2 * 25) / 1e6)


async def test_a_turn_that_stays_paused_is_an_error_not_an_answer() -> None:
    with FakeAnthropicServer(lambda body: HostileReply.raw(PAUSED)) as server:
        with pytest.raises(corral.ModelError, match="still paused"):
            await client(server).complete(HELLO)
    assert server.calls == 1 + MAX_CONTINUATIONS
