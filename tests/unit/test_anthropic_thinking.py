"""Extended thinking with tool use: the Messages API wants an assistant turn that used
tools sent back beginning with its thinking blocks, unchanged and signed (redacted
ones as they came). `FakeAnthropicServer` checks it as the real API does; `ToolAgent`
sends them back from the trial's history, so a resumed trial does too."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.history import ModelCallPayload, decode
from corral.models import Anthropic, ChatResponse, OpenAICompatible, ThinkingBlock
from corral.testing import ChatReply, FakeAnthropicServer, FakeChatServer, thinking_signature

from ..support.tool_bench import Ledger, balance_of

pytestmark = pytest.mark.anyio

THINKING = {"thinking": {"type": "enabled", "budget_tokens": 1024}}
HELLO = [{"role": "user", "content": "hello"}]
TOOL = {
    "type": "function",
    "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}},
}


def thinking_ledger(body: dict[str, Any]) -> ChatReply:
    """Look the account up, then its balance, then answer: each reply thought first
    (the first one's thinking partly redacted)."""
    last = body["messages"][-1]["content"]
    results = [b for b in last if b["type"] == "tool_result"]
    if not results:
        account = json.loads(last[0]["text"].split("Inputs:\n", 1)[1])["account"]
        reply = ChatReply.tools(("lookup", {"account": account}), reasoning="Look it up.")
        return dataclasses.replace(reply, redacted="something the provider hides")
    value = json.loads(results[0]["content"])
    if isinstance(value, dict):
        return ChatReply.tools(
            ("balance", {"ledger": value["ledger"]}), reasoning="Now its balance."
        )
    return ChatReply.text(str(value), reasoning="That is the answer.")


def teller(url: str) -> ToolAgent:
    model = Anthropic("claude-test", base_url=url, api_key="k", extra_body=THINKING)
    return ToolAgent(model, "Answer with the balance.", parse_final=int)


def ledger_tasks() -> dict[str, Meta]:
    return {"acct-3": Meta("teller", "ledger", inputs={"prompt": "Balance?", "account": 3})}


def assistant_turns(request: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [m["content"] for m in request["messages"] if m["role"] == "assistant"]


async def test_the_fake_refuses_a_tool_use_turn_without_its_signed_thinking() -> None:
    with FakeAnthropicServer() as server:
        model = Anthropic("m", base_url=server.url, api_key="k", extra_body=THINKING)
        server.enqueue(ChatReply.tools(("lookup", {}), reasoning="think"), ChatReply.text("ok"))
        first = await model.complete(HELLO, tools=[TOOL])
        (call,) = first.tool_calls
        answer = {"role": "tool", "tool_call_id": call.id, "content": "L1"}
        bare = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call.id, "function": {"name": "lookup", "arguments": "{}"}}],
        }
        with pytest.raises(corral.ModelError, match="must start with a thinking block"):
            await model.complete([*HELLO, bare, answer], tools=[TOOL])
        forged = {**bare, "thinking_blocks": [{"type": "thinking", "thinking": "think"}]}
        with pytest.raises(corral.ModelError, match="Invalid `signature`"):
            await model.complete([*HELLO, forged, answer], tools=[TOOL])
        altered = {
            "type": "thinking",
            "thinking": "thought",
            "signature": thinking_signature("think"),
        }
        with pytest.raises(corral.ModelError, match="Invalid `signature`"):
            await model.complete([*HELLO, {**bare, "thinking_blocks": [altered]}, answer])
        signed = {**bare, "thinking_blocks": [b.as_dict() for b in first.thinking]}
        assert (await model.complete([*HELLO, signed, answer], tools=[TOOL])).content == "ok"
    assert server.requests[-1]["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "think",
        "signature": thinking_signature("think"),
    }


async def test_the_reply_keeps_its_thinking_blocks_signed_and_redacted() -> None:
    with FakeAnthropicServer() as server:
        reply = ChatReply.tools(("lookup", {}), reasoning="think")
        server.enqueue(dataclasses.replace(reply, redacted="hidden"))
        model = Anthropic("m", base_url=server.url, api_key="k", extra_body=THINKING)
        response = await model.complete(HELLO, tools=[TOOL])
    redacted, thought = response.thinking
    assert isinstance(thought, ThinkingBlock) and redacted.redacted
    assert redacted.data and "hidden" not in redacted.data
    assert (thought.text, thought.signature) == ("think", thinking_signature("think"))
    assert response.reasoning == "think"  # the redacted block says nothing
    assert [b["type"] for b in response.message["content"]][:2] == [
        "redacted_thinking",
        "thinking",
    ]


async def test_a_tool_agent_sends_each_turn_back_with_its_thinking(tmp_path: Path) -> None:
    store = corral.SQLiteStore(tmp_path / "runs.db")
    with FakeAnthropicServer(thinking_ledger) as server:
        runner = corral.CorralRunner(
            ledger_tasks(), {"teller": teller(server.url)}, {"ledger": Ledger()}, store=store
        )
        report = await runner.run("think")
    trial = report.tasks["acct-3"].trials[0]
    assert trial.passed and trial.output == balance_of(3), trial.error
    assert server.calls == 3
    first, second = assistant_turns(server.requests[2])
    assert [b["type"] for b in first] == ["redacted_thinking", "thinking", "tool_use"]
    assert [b["type"] for b in second] == ["thinking", "tool_use"]
    assert second[0]["signature"] == thinking_signature("Now its balance.")
    # Recorded: the reasoning as text, the blocks whole (signed) beside it.
    async with store.opened():
        history = await store.history(corral.TrialKey("think", "acct-3", 0))
    calls = [decode(c) for c in history if c.kind == "model_call"]
    reasoning = [c.reasoning for c in calls if isinstance(c, ModelCallPayload)]
    assert reasoning == ["Look it up.", "Now its balance.", "That is the answer."]
    stored = history[[c.kind for c in history].index("model_call")].payload
    assert "reasoning" not in stored  # the blocks' text, not stored twice
    assert stored["thinking"][1]["signature"] == thinking_signature("Look it up.")


async def test_a_resumed_trial_sends_back_the_thinking_its_history_holds(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    stalled = anyio.Event()

    class Stalls(Ledger):
        async def execute(self, action: corral.Action, session: corral.AgentSession) -> Any:
            if action.tool == "balance":
                stalled.set()
                await anyio.sleep_forever()  # the first run is cancelled here
            return await super().execute(action, session)

    with FakeAnthropicServer(thinking_ledger) as server:
        first = corral.CorralRunner(
            ledger_tasks(),
            {"teller": teller(server.url)},
            {"ledger": Stalls()},
            store=corral.SQLiteStore(path),
        )

        async def run_first() -> None:
            await first.run("resume")
            stalled.set()  # ended without stalling: what follows says how

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_first)
            await stalled.wait()
            tg.cancel_scope.cancel()
        assert server.calls == 2
        again = corral.CorralRunner(
            ledger_tasks(),
            {"teller": teller(server.url)},
            {"ledger": Ledger()},
            store=corral.SQLiteStore(path),
        )
        report = await again.run("resume")
    trial = report.tasks["acct-3"].trials[0]
    assert trial.passed, trial.error
    assert server.calls == 3  # the resumed trial asked once more, and was not refused
    turns = assistant_turns(server.requests[2])
    assert [[b["type"] for b in turn][0] for turn in turns] == ["redacted_thinking", "thinking"]


async def test_openai_compatible_replies_keep_reasoning_content_and_gateway_blocks() -> None:
    with FakeChatServer([ChatReply.text("hi", reasoning="because")]) as server:
        response = await OpenAICompatible("m", base_url=server.url).complete(HELLO)
    assert (response.reasoning, response.thinking) == ("because", ())
    block = {"type": "thinking", "thinking": "t", "signature": "s"}
    message = {"role": "assistant", "content": "x", "thinking_blocks": [block]}
    parsed = corral.models.OpenAICompatible("m", base_url="http://127.0.0.1:9").parse(
        {"choices": [{"message": message}]}
    )
    assert isinstance(parsed, ChatResponse)
    assert (parsed.reasoning, [b.as_dict() for b in parsed.thinking]) == ("t", [block])


def test_a_reader_shows_a_turns_thinking_blocks_and_marks_the_redacted() -> None:
    from corral.history import chat_message

    turn = {
        "role": "assistant",
        "content": [{"type": "redacted_thinking", "data": "opaque"}, {"type": "text", "text": "x"}],
        "thinking_blocks": [{"type": "thinking", "thinking": "first", "signature": "s"}],
    }
    message = chat_message(turn)
    assert (message.text, message.reasoning) == ("x", "first\n\n[redacted thinking]")
    assert "opaque" not in repr(message)


async def test_a_replys_redacted_thinking_is_marked_in_its_transcript() -> None:
    # The reply's redacted block (before "Look it up.") was left out of both transcripts:
    # a reader saw no sign that the model's thinking was partly hidden from it.
    from rich.console import Console

    from corral._history import load_history
    from corral.cli._transcript import render_transcript
    from corral.view._transcript import transcript_data

    store = corral.MemoryStore()
    with FakeAnthropicServer(thinking_ledger) as server:
        runner = corral.CorralRunner(
            ledger_tasks(), {"teller": teller(server.url)}, {"ledger": Ledger()}, store=store
        )
        await runner.run("hidden")
    history = await store.history(corral.TrialKey("hidden", "acct-3", 0))
    replies = [e["reply"]["reasoning"] for e in transcript_data(history)]
    assert replies == [
        "[redacted thinking]\n\nLook it up.",
        "Now its balance.",
        "That is the answer.",
    ]
    async with store.opened():
        trial = await load_history(store, "hidden", "acct-3", 0)
    console = Console(width=200, record=True)
    console.print(render_transcript(trial))
    shown = console.export_text()
    assert shown.count("[redacted thinking]") == 1
    assert shown.index("[redacted thinking]") < shown.index("Look it up.")


def thinks_once(body: dict[str, Any]) -> ChatReply:
    """`thinking_ledger` as Claude answers without interleaved thinking: it thinks before
    its first tool call only, not again after a tool's result, until the next user
    turn that is not only tool results."""
    reply = thinking_ledger(body)
    if body["messages"][-1]["content"][0]["type"] == "tool_result":
        return dataclasses.replace(reply, reasoning=None)
    return reply


async def test_a_tool_loop_that_thought_only_before_its_first_call_is_accepted(
    tmp_path: Path,
) -> None:
    with FakeAnthropicServer(thinks_once) as server:
        agents = {"teller": teller(server.url)}
        store = corral.SQLiteStore(tmp_path / "runs.db")
        runner = corral.CorralRunner(ledger_tasks(), agents, {"ledger": Ledger()}, store=store)
        report = await runner.run("thinks-once")
        record = report.tasks["acct-3"].trials[0]
        assert str(record.status) == "completed" and record.output == balance_of(3), record.error
        # The API wants the tool loop's first assistant turn to begin with its thinking,
        # not each one: the second came without any and is sent back so.
        first, second = assistant_turns(server.requests[2])
        assert [b["type"] for b in first] == ["redacted_thinking", "thinking", "tool_use"]
        assert [b["type"] for b in second] == ["tool_use"]
        model = Anthropic("m", base_url=server.url, api_key="k", extra_body=THINKING)
        call = {"id": "toolu_x", "function": {"name": "lookup", "arguments": "{}"}}
        bare = {"role": "assistant", "content": None, "tool_calls": [call]}
        answer = {"role": "tool", "tool_call_id": "toolu_x", "content": "L1"}
        # Without thinking before the loop's first call it is still refused.
        with pytest.raises(corral.ModelError, match="must start with a thinking block"):
            await model.complete([*HELLO, bare, answer, bare, answer], tools=[TOOL])
