"""A small ToolAgent benchmark shared by tests (and their kill -9 child): a ledger
environment whose tasks need two tool steps, and a scripted model for it.

Task ``acct-N`` asks for the balance of account N: the model calls ``lookup``
(which gives the account's ledger id), then ``balance`` with that id, then
answers. Each reply depends only on the conversation, like a model at
temperature 0.
"""

from __future__ import annotations

import json
from typing import Any

import corral
from corral import Action, Evaluation, ToolEffect, TrialRecord
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.models import Anthropic, OpenAICompatible
from corral.testing import ChatReply

LOOKUP = corral.Tool(
    "lookup",
    "The ledger id of an account.",
    {
        "type": "object",
        "properties": {"account": {"type": "integer"}},
        "required": ["account"],
        "additionalProperties": False,
    },
)
BALANCE = corral.Tool(
    "balance",
    "The balance of a ledger.",
    {"type": "object", "properties": {"ledger": {"type": "string"}}, "required": ["ledger"]},
)


#: The commit kinds of one ledger trial: each model call recorded just before what
#: followed from it (the turn's action, or the terminal).
LEDGER_HISTORY = [
    "setup",
    "model_call",
    "action",
    "tool_effect",
    "model_call",
    "action",
    "tool_effect",
    "model_call",
    "terminal",
    "evaluation",
]


def balance_of(account: int) -> int:
    return account * 100 + 7


class Ledger:
    """Executes ``lookup`` and ``balance``; counts its executions."""

    tools = (LOOKUP, BALANCE)

    def __init__(self) -> None:
        self.executed: list[tuple[str, dict[str, Any]]] = []

    async def setup(self, session: corral.AgentSession) -> Any:
        return {"calls": 0}

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        self.executed.append((action.tool, dict(action.arguments)))
        state = {"calls": session.state["calls"] + 1}
        if action.tool == "lookup":
            return ToolEffect({"ledger": f"L{action.arguments['account']}"}, state)
        return ToolEffect(balance_of(int(action.arguments["ledger"][1:])), state)

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        name, _, number = trial.task_id.partition("-")
        passed = name == "acct" and trial.output == balance_of(int(number))
        return Evaluation(float(passed), passed)


WRITE = corral.Tool(
    "write",
    "Write text to a file (empty without one).",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
        "required": ["path"],
    },
)


class Notes:
    """Executes ``write``, whose ``text`` is optional; keeps what it was asked to write."""

    tools = (WRITE,)

    def __init__(self) -> None:
        self.written: list[dict[str, Any]] = []

    async def setup(self, session: corral.AgentSession) -> Any:
        return None

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        self.written.append(dict(action.arguments))
        return ToolEffect("written")

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return Evaluation(1.0, True)


def _account_of(messages: list[dict[str, Any]]) -> int:
    user = next(m for m in messages if m["role"] == "user")
    return int(json.loads(user["content"].split("Inputs:\n", 1)[1])["account"])


def ledger_model(body: dict[str, Any]) -> ChatReply:
    """The scripted model: lookup, then balance, then the answer."""
    messages = body["messages"]
    last = messages[-1]
    if last["role"] == "user":
        return ChatReply.tools(("lookup", {"account": _account_of(messages)}), usage=(50, 10))
    if last["content"].startswith("error:"):
        return ChatReply.text("0", usage=(90, 1))  # gives up
    result = json.loads(last["content"])
    if isinstance(result, dict):
        return ChatReply.tools(("balance", {"ledger": result["ledger"]}), usage=(80, 12))
    return ChatReply.text(str(result), usage=(100, 3))


def tasks(n: int, model: str | None = None) -> dict[str, Meta]:
    return {
        f"acct-{i}": Meta(
            "teller",
            "ledger",
            model=model,
            max_iterations=4,
            inputs={"prompt": "What is the balance of this account?", "account": i},
        )
        for i in range(1, n + 1)
    }


def agent(url: str, provider: str = "openai") -> ToolAgent:
    """The teller on the model at ``url``: OpenAI-compatible, or ``"anthropic"``."""
    client = OpenAICompatible if provider == "openai" else Anthropic
    return ToolAgent(
        client("teller-model", base_url=url, timeout=10, prices={"input": 1.0}),
        system_prompt="You are a bank teller. Use the tools.",
        parse_final=int,
        seed=11,
    )
