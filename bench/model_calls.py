"""What recording model calls costs: bytes stored per call, and CPU per call.

    PYTHONPATH=src:. python bench/model_calls.py [--turns 30] [--calls 2000]

Storage: one ToolAgent trial of ``--turns`` turns (a tool call each, then an answer)
against a local FakeChatServer, into SQLite; the bytes of JSON its ``model_call``
commits hold (each call's messages as the delta on the call before), against the
same calls each storing its whole conversation.

CPU: the recording path of one call, alone (``session.chat(model)`` over a model
that answers at once, then staging: the delta, the cap, the payload, its JSON),
for a conversation of ``--turns`` turns: Python function calls per call (cProfile,
independent of load) and microseconds per call (wall time: depends on load).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import corral
from corral import Action, Evaluation, ToolEffect, TrialRecord
from corral import BenchmarkTaskMetadata as Meta
from corral._chat import ChatResponse, ToolCall
from corral._types import Usage
from corral.agents import ToolAgent
from corral.history import CallChain, ModelCallPayload, TrialFold, decode, encode
from corral.models import OpenAICompatible
from corral.testing import ChatReply, FakeChatServer

TOOL = corral.Tool("search", "Searches.", {"type": "object"})
#: A tool result of about 1.5 KB, a system prompt of 600 characters: a typical agent.
RESULT = "result line with some words in it; " * 40
SYSTEM = "You are a careful research agent. " * 18


class Search:
    tools = (TOOL,)

    async def setup(self, session: corral.AgentSession) -> Any:
        return None

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        return ToolEffect(f"{RESULT} (turn {session.iteration})")

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return Evaluation(1.0, True)


def storage_run(turns: int) -> list[corral.Commit]:
    """The commits of one ToolAgent trial of ``turns`` turns, run into SQLite."""

    def reply(body: dict[str, Any]) -> ChatReply:
        done = sum(1 for m in body["messages"] if m["role"] == "tool")
        if done >= turns - 1:
            return ChatReply.text("the answer", usage=(1000, 20))
        said = f"I will search for item {done} next, then compare."
        return ChatReply.tools(("search", {"query": f"item {done}"}), content=said, usage=(900, 30))

    with tempfile.TemporaryDirectory() as folder, FakeChatServer(reply) as server:
        path = Path(folder) / "store.db"
        model = OpenAICompatible("m", base_url=server.url)
        tasks = {"t": Meta("a", "e", max_iterations=turns + 1, inputs={"prompt": "Find it."})}
        runner = corral.CorralRunner(
            tasks, {"a": ToolAgent(model, system_prompt=SYSTEM)}, {"e": Search()}, store=path
        )
        anyio.run(lambda: runner.run("storage"))

        async def history() -> list[corral.Commit]:
            store = corral.SQLiteStore(path)
            async with store.opened():
                return await store.history(corral.TrialKey("storage", "t", 0))

        return anyio.run(history)


def storage(turns: int) -> dict[str, Any]:
    commits = storage_run(turns)
    delta = whole = 0
    chain = CallChain()
    calls = 0
    for commit in commits:
        if commit.kind != "model_call":
            continue
        calls += 1
        call = decode(commit)
        assert isinstance(call, ModelCallPayload)
        messages = chain.apply(call)
        delta += len(json.dumps(commit.payload))
        whole += len(json.dumps(encode(_replaced(call, messages))))
    return {
        "turns": turns,
        "calls": calls,
        "delta_bytes_per_call": delta // calls,
        "whole_bytes_per_call": whole // calls,
        "delta_total": delta,
        "whole_total": whole,
        "ratio": round(whole / delta, 1),
    }


def _replaced(call: ModelCallPayload, messages: list[Any]) -> ModelCallPayload:
    import dataclasses

    return dataclasses.replace(call, keep=0, messages=tuple(messages))


class Instant:
    """A model that answers at once: what is measured is the recording alone."""

    model = "m"
    base_url = "http://127.0.0.1"

    def __init__(self) -> None:
        self.response = ChatResponse(
            "I will search next.",
            (ToolCall("c1", "search", '{"query": "x"}'),),
            Usage(900, 30, 0.001),
            "tool_calls",
        )

    async def complete(self, messages: Any, **options: Any) -> ChatResponse:
        return self.response


def conversation(turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Find it."},
    ]
    for i in range(turns):
        out.append(
            {
                "role": "assistant",
                "content": "I will search next.",
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "search", "arguments": '{"query": "x"}'},
                    }
                ],
            }
        )
        out.append({"role": "tool", "tool_call_id": f"call_{i}", "content": RESULT})
    return out


def cpu(turns: int, calls: int) -> dict[str, Any]:
    """``calls`` calls, each the next turn of a conversation rebuilt as new dicts (as
    ToolAgent sends it), recorded and staged as the runtime does."""
    session = corral.AgentSession(
        benchmark_id="b", task_id="t", trial=0, metadata=Meta("a", "e"), inputs={}
    )
    fold = TrialFold()
    chat = session.chat(Instant())
    sent = [json.loads(json.dumps(conversation(i % turns))) for i in range(turns)]

    async def one(i: int) -> None:
        await chat.complete(sent[i % turns])
        for payload in session.calls.take(fold, []):
            text = json.dumps(encode(payload))  # what the store writes
            commit = corral.Commit(i, "model_call", json.loads(text), 0.0)
            fold.apply(commit, payload)
            session.calls.staged(i)
        session.take_usage()

    async def run() -> float:
        start = time.perf_counter()
        for i in range(calls):
            await one(i)
        return time.perf_counter() - start

    seconds = anyio.run(run)
    profile = cProfile.Profile()
    profile.enable()
    anyio.run(run)
    profile.disable()
    stats = pstats.Stats(profile)
    total = sum(n for (_, n, *_rest) in stats.stats.values())  # type: ignore[attr-defined]
    return {
        "conversation_turns": turns,
        "calls": calls,
        "python_calls_per_call": round(total / calls, 1),
        "microseconds_per_call (wall, load-dependent)": round(seconds / calls * 1e6, 1),
        "note": "includes json.dumps/json.loads of the payload, as a store does",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    print(
        json.dumps({"storage": storage(args.turns), "cpu": cpu(args.turns, args.calls)}, indent=1)
    )


if __name__ == "__main__":
    main()
