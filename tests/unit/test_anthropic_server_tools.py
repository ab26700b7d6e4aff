"""A reply that used one of Anthropic's server tools (a web search) holds the tool's
use and its results among its text: they were dropped from the record, so the
transcript did not show the search, and the next turn of a `ToolAgent` (rebuilt from
the history) sent the reply back without them: the model lost what it had found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.cli import main
from corral.history import ModelCallPayload, decode
from corral.models import Anthropic
from corral.models._messages_api import convert_messages
from corral.testing import ChatReply, FakeAnthropicServer
from corral.view._transcript import transcript_data

from ..support.tool_bench import Ledger, balance_of

SEARCH = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "ledger of account 3"},
}
FOUND = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://bank.example/ledgers",
            "title": "Ledgers by account",
            "encrypted_content": "opaque-bytes",
        }
    ],
}
SERVED = (
    {"type": "text", "text": "Let me search. "},
    SEARCH,
    FOUND,
    {"type": "text", "text": "Found it: "},
)


def searcher(body: dict[str, Any]) -> ChatReply:
    """Search the web and look the account up in one reply, then answer."""
    last = body["messages"][-1]["content"]
    results = [b for b in last if b["type"] == "tool_result"]
    if not results:
        reply = ChatReply.tools(("lookup", {"account": 3}))
        return ChatReply(reply.content, reply.tool_calls, served=SERVED)
    return ChatReply.text(str(balance_of(3)))


def run(path: Path, url: str) -> corral.BenchmarkReport:
    tasks = {"acct-3": Meta("agent", "ledger", inputs={"prompt": "Balance of account 3?"})}
    agent = ToolAgent(Anthropic("claude-test", base_url=url, api_key="k"), parse_final=int)

    async def go() -> corral.BenchmarkReport:
        runner = corral.CorralRunner(
            tasks, {"agent": agent}, {"ledger": Ledger()}, store=corral.SQLiteStore(path)
        )
        return await runner.run("web")

    return anyio.run(go)


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    path = tmp_path_factory.mktemp("served") / "store.db"
    with FakeAnthropicServer(searcher) as server:
        report = run(path, server.url)
        requests = list(server.requests)
    trial = report.tasks["acct-3"].trials[0]
    assert trial.passed, trial.error
    return path, requests


def test_the_next_turn_sends_the_search_and_its_results_back(
    searched: tuple[Path, list[dict[str, Any]]],
) -> None:
    _, requests = searched
    assert len(requests) == 2
    (turn,) = [m["content"] for m in requests[1]["messages"] if m["role"] == "assistant"]
    assert [b["type"] for b in turn] == [
        "text",
        "server_tool_use",
        "web_search_tool_result",
        "text",
        "tool_use",
    ]
    assert turn[1] == SEARCH and turn[2] == FOUND  # as sent, the opaque content too
    # Its tool use under the id the conversation gives the call, which its result names.
    (result,) = [b for b in requests[1]["messages"][-1]["content"] if b["type"] == "tool_result"]
    assert turn[4]["id"] == result["tool_use_id"]


def test_the_record_keeps_the_blocks_and_the_transcript_shows_them_in_place(
    searched: tuple[Path, list[dict[str, Any]]],
) -> None:
    path, _ = searched

    async def history() -> list[corral.Commit]:
        store = corral.SQLiteStore(path)
        async with store.opened():
            return await store.history(corral.TrialKey("web", "acct-3", 0))

    commits = anyio.run(history)
    calls = [decode(c) for c in commits if c.kind == "model_call"]
    first = calls[0]
    assert isinstance(first, ModelCallPayload)
    assert [b["type"] for b in first.blocks][1:3] == ["server_tool_use", "web_search_tool_result"]
    assert isinstance(calls[1], ModelCallPayload) and calls[1].blocks == ()  # no search

    pieces = transcript_data(commits)[0]["reply"]["pieces"]
    assert [(p["kind"], p["name"]) for p in pieces] == [
        ("text", ""),
        ("server", "server_tool_use web_search"),
        ("server", "web_search_tool_result"),
        ("text", ""),
        ("call", "lookup"),
    ]
    assert pieces[2]["text"] == "Ledgers by account <https://bank.example/ledgers>"
    assert transcript_data(commits)[1]["reply"]["pieces"] is None

    args = ["show", "web", "acct-3", "0", "--store", str(path), "--transcript"]
    shown = CliRunner(env={"COLUMNS": "300", "NO_COLOR": "1"}).invoke(main, args)
    assert shown.exit_code == 0, shown.output
    out = shown.output
    assert "server_tool_use web_search" in out and '"ledger of account 3"' in out
    assert "Ledgers by account <https://bank.example/ledgers>" in out
    assert "opaque-bytes" not in out
    assert out.index("Let me search.") < out.index("web_search") < out.index("Found it:")
    assert out.index("Found it:") < out.index("→ lookup")


def test_a_turn_the_agent_changed_is_sent_as_it_says() -> None:
    """The blocks stand for the reply only while its text and calls are theirs."""
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "lookup", "arguments": json.dumps({"account": 3})},
    }
    tool_use = {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"account": 3}}
    blocks = [*SERVED, tool_use]
    said = {"role": "assistant", "content": "Let me search. Found it: ", "tool_calls": [call]}
    _, turns = convert_messages([{**said, "content_blocks": blocks}])
    assert turns[0]["content"] == blocks
    _, turns = convert_messages([{**said, "content": "Changed.", "content_blocks": blocks}])
    assert [b["type"] for b in turns[0]["content"]] == ["text", "tool_use"]
    with pytest.raises(corral.ConfigError, match="content_blocks must be a list of blocks"):
        convert_messages([{**said, "content_blocks": "nope"}])
