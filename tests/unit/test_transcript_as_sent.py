"""Transcripts show what was sent: an assistant message that is not the previous reply
is shown, and ToolAgent sends back the text beside its tool calls whole."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

import corral
from corral import Action, Final
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.history import transcript
from corral.models import OpenAICompatible
from corral.testing import ChatReply, FakeChatServer, FakeEnvironment

from ..support.tool_bench import Ledger

pytestmark = pytest.mark.anyio


class Editor:
    """Asks once, then sends the conversation on with its own (edited) version of the
    reply instead of the reply itself."""

    async def act(self, session: corral.AgentSession) -> Action | Final:
        first = [{"role": "user", "content": "go"}]
        session.record_model_call(first, text="the reply as the model gave it", model="m")
        second = [
            *first,
            {"role": "assistant", "content": "AN EDITED REPLY THE MODEL NEVER GAVE"},
            {"role": "user", "content": "and now?"},
        ]
        session.record_model_call(second, text="ok", model="m")
        return Final("done")


async def test_the_transcript_shows_an_assistant_message_that_is_not_the_previous_reply() -> None:
    store = corral.MemoryStore()
    env = FakeEnvironment("env")
    runner = corral.CorralRunner(
        {"t": Meta("ed", "env")}, {"ed": Editor()}, {"env": env}, store=store
    )
    await runner.run("ed")
    history = await store.history(corral.TrialKey("ed", "t", 0))
    calls = [e for e in transcript(history) if isinstance(e, corral.history.TranscriptCall)]
    shown = [(m.role, m.text) for m in calls[1].sent]
    # What the second call sent beyond the first call's messages: both messages.
    assert shown == [
        ("assistant", "AN EDITED REPLY THE MODEL NEVER GAVE"),
        ("user", "and now?"),
    ]


async def test_tool_agent_sends_back_the_text_beside_tool_calls_uncut() -> None:
    said = "Let me look that up for you. " * 10  # 290 characters
    with FakeChatServer() as server:
        server.enqueue(
            dataclasses.replace(ChatReply.tools(("lookup", {"account": 3})), content=said),
            ChatReply.text("307"),
        )
        model = OpenAICompatible("m", base_url=server.url, api_key="k")
        agent = ToolAgent(model, parse_final=int, record_chars=100)
        runner = corral.CorralRunner(
            {"acct-3": Meta("teller", "ledger", inputs={"prompt": "Balance?", "account": 3})},
            {"teller": agent},
            {"ledger": Ledger()},
            store=corral.MemoryStore(),
        )
        await runner.run("b")
        second: Any = server.requests[1]
    (assistant,) = [m for m in second["messages"] if m["role"] == "assistant"]
    # The recording cap bounds what is stored, not what the model is sent back.
    assert assistant["content"] == said
