"""Replies of the wrong shape from `HostileChatServer` (real HTTP on 127.0.0.1): an
error naming the endpoint and what was wrong, content kept as JSON, absurd usage
refused, and a bound on the tool calls one turn runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.models import Anthropic, OpenAICompatible
from corral.testing import (
    ChatReply,
    ConcurrencyGauge,
    HostileChatServer,
    HostileReply,
    chat_request,
)

from .test_models_waits import HELLO, PROVIDERS, client, hostile, model_for

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("reply", "named"),
    [
        (HostileReply.shaped(content=None, tool_calls=5), "tool_calls is 5, not a list"),
        (HostileReply.shaped(content=None, tool_calls=[7]), "a tool call without a function"),
        (HostileReply.shaped(content=None, tool_calls={"a": 1}), "tool_calls is {'a': 1}"),
        (ChatReply.text("x", usage=(10**30, 1)), "usage.prompt_tokens"),
        (ChatReply.text("x", usage=(1, 2**63)), "usage.completion_tokens"),
    ],
    ids=["int", "not-an-object", "object", "prompt-tokens", "completion-tokens"],
)
async def test_a_malformed_reply_names_the_endpoint_and_the_fault(reply: Any, named: str) -> None:
    with HostileChatServer(reply) as server:
        with pytest.raises(corral.ModelUnavailable) as caught:
            await client(server).complete(HELLO)
    message = str(caught.value)
    assert f"from {server.url}/chat/completions is not a chat completion" in message
    assert named in message


def message(**fields: Any) -> HostileReply:
    """A Messages API reply with these fields."""
    return HostileReply.raw({"type": "message", "role": "assistant", "content": [], **fields})


@pytest.mark.parametrize(
    ("reply", "named"),
    [
        (message(content=5), "content is 5, not a list"),
        (message(content=[7]), "a content block that is not an object: 7"),
        (message(content=[{"type": "tool_use", "input": {}}]), "a tool_use block without a name"),
        (message(content=[{"type": "text", "text": {"a": 1}}]), "a text block whose text is"),
        (message(content=[{"type": "thinking"}]), "a thinking block whose thinking is None"),
        (message(usage={"input_tokens": 10**30}), "usage.input_tokens"),
        (message(usage={"cache_read_input_tokens": -5}), "usage.cache_read_input_tokens"),
        (message(usage={"cache_creation_input_tokens": 2.5}), "usage.cache_creation_input"),
        (
            message(usage={"cache_creation": {"ephemeral_1h_input_tokens": -1}}),
            "usage.cache_creation.ephemeral_1h_input_tokens is -1",
        ),
        (HostileReply.raw({"choices": []}), "content is None, not a list"),
        (HostileReply.raw([1, 2]), "the body is not a JSON object"),
    ],
    ids=[
        "content-int",
        "block-int",
        "tool-no-name",
        "text-object",
        "thinking-none",
        "input-tokens",
        "cache-read",
        "cache-write",
        "cache-write-1h",
        "openai-body",
        "array",
    ],
)
async def test_a_malformed_messages_reply_names_the_endpoint_and_the_fault(
    reply: HostileReply, named: str
) -> None:
    with hostile("anthropic", reply) as server:
        with pytest.raises(corral.ModelUnavailable) as caught:
            await model_for("anthropic", server).complete(HELLO)
    text = str(caught.value)
    assert f"from {server.url}/v1/messages is not a Messages API reply" in text
    assert named in text


async def test_tool_input_that_is_not_an_object_reaches_the_agent_as_written() -> None:
    use = {"type": "tool_use", "id": "t1", "name": "echo", "input": "oops"}
    with hostile("anthropic", message(content=[use, {"type": "mystery"}])) as server:
        response = await model_for("anthropic", server).complete(HELLO)
    assert response.content is None and response.tool_calls[0].arguments == '"oops"'


async def test_content_that_is_not_text_is_kept_as_json() -> None:
    with HostileChatServer(HostileReply.shaped(content={"answer": [4, 2]})) as server:
        response = await client(server).complete(HELLO)
    assert response.content is not None and json.loads(response.content) == {"answer": [4, 2]}


async def test_content_as_a_list_of_text_parts_is_their_text() -> None:
    parts = [{"type": "text", "text": "The answer "}, {"type": "text", "text": "is 4."}]
    mixed = [{"type": "text", "text": "see"}, {"type": "image_url", "image_url": {"url": "x"}}]
    with HostileChatServer(
        [HostileReply.shaped(content=parts), HostileReply.shaped(content=mixed)]
    ) as server:
        model = client(server)
        assert (await model.complete(HELLO)).content == "The answer is 4."
        kept = (await model.complete(HELLO)).content  # not only text: all of it, as JSON
    assert kept is not None and json.loads(kept) == mixed


async def test_a_refusal_is_the_replys_text() -> None:
    """OpenAI puts a refusal in ``refusal``, with ``content`` null: it is what the model
    answered, and the trial's output and transcript must say it."""
    refused = HostileReply.shaped(content=None, refusal="I can't help with that.")
    with HostileChatServer(refused) as server:
        response = await client(server).complete(HELLO)
    assert response.content == "I can't help with that."


class Echo:
    """Declares one tool; counts its concurrent executions."""

    tools = [corral.Tool("echo")]

    def __init__(self) -> None:
        self.gauge = ConcurrencyGauge()
        self.executed = 0

    async def setup(self, session: corral.AgentSession) -> None:
        return None

    async def execute(self, action: corral.Action, session: corral.AgentSession) -> Any:
        self.executed += 1
        with self.gauge.hold("echo"):
            return corral.ToolEffect(action.arguments)

    async def evaluate(self, trial: corral.TrialRecord) -> corral.Evaluation:
        return corral.Evaluation(1.0, True)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_tool_calls_of_one_turn_are_bounded(provider: str) -> None:
    many = ChatReply.tools(*[("echo", {"i": i}) for i in range(5000)])
    with hostile(provider, [many, ChatReply.text("done")]) as server:
        env = Echo()
        runner = corral.CorralRunner(
            {"t": Meta("a", "e")},
            {"a": ToolAgent(model_for(provider, server), max_tool_calls=8)},
            {"e": env},
            store=corral.MemoryStore(),
        )
        report = await runner.run("many")
        record = report.tasks["t"].trials[0]
        assert str(record.status) == "completed" and record.output == "done"
        assert env.executed == 8 and env.gauge.peak("echo") <= 8
        history = await runner.store.history(corral.TrialKey("many", "t", 0))
        effects = [c.payload["observation"] for c in history if c.kind == "tool_effect"]
        refusal = (
            "error: too many tool calls in one reply: 5000, the most is 8 (max_tool_calls); "
            "the 4992 after the first 8 were not run"
        )
        assert len(effects) == 9 and effects.count(refusal) == 1
        # The model sees the refusal as the answer to the last call of that turn.
        request = server.requests[-1]
        last = (request if provider == "openai" else chat_request(request))["messages"]
        assert last[-1]["role"] == "tool" and last[-1]["content"] == refusal


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
@pytest.mark.parametrize("model", [OpenAICompatible, Anthropic])
def test_a_bad_bound_is_refused(model: type[OpenAICompatible | Anthropic], bad: object) -> None:
    with pytest.raises(corral.ConfigError, match="max_tool_calls"):
        ToolAgent(model("m", api_key=""), max_tool_calls=bad)  # type: ignore[arg-type]


def with_usage(prompt_tokens: Any) -> HostileReply:
    message = {"role": "assistant", "content": "x"}
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": 1}
    return HostileReply.raw({"choices": [{"index": 0, "message": message}], "usage": usage})


@pytest.mark.parametrize("count", [1e30, -5, "12", 2.5, float(2**53), True], ids=repr)
async def test_a_token_count_of_the_wrong_kind_is_refused_not_zero(count: Any) -> None:
    with HostileChatServer(with_usage(count)) as server:
        with pytest.raises(corral.ModelUnavailable) as caught:
            await client(server).complete(HELLO)
    message = str(caught.value)
    assert f"from {server.url}/chat/completions is not a chat completion" in message
    assert "usage.prompt_tokens" in message


async def test_an_integral_float_token_count_is_its_int() -> None:
    with HostileChatServer(with_usage(12.0)) as server:
        response = await client(server).complete(HELLO)
    assert response.usage.input_tokens == 12 and type(response.usage.input_tokens) is int
