"""A ToolAgent benchmark whose transcript has everything a page must show, each value
hostile: a rate-limited try, a reply with text, reasoning and two parallel tool
calls, a 5xx that fails the attempt (retried), and a final answer with reasoning.

The model is a `FakeChatServer` (real HTTP on 127.0.0.1) playing a fixed script.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import anyio

import corral
from corral import Action, Evaluation, ToolEffect, TrialRecord
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.models import OpenAICompatible
from corral.testing import ChatReply, FakeChatServer, HostileReply

from .viewer_stores import HOSTILE

ECHO = corral.Tool("echo", "Says back what it is given.", {"type": "object"})

#: The text of each recorded field, hostile (a page must show it as text).
SYSTEM = "system " + HOSTILE[0]
PROMPT = "prompt " + HOSTILE[1]
SAID = "said " + HOSTILE[2]
THOUGHT = "thought " + HOSTILE[3]
ARGUMENT = "argument " + HOSTILE[4]
FAILURE = "failure " + HOSTILE[5]
ANSWER = "answer " + HOSTILE[0]
LAST_THOUGHT = "last thought " + HOSTILE[1]


class Echo:
    tools = (ECHO,)

    async def setup(self, session: corral.AgentSession) -> Any:
        return None

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        return ToolEffect({"echo": action.arguments, "html": HOSTILE[4]})

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return Evaluation(1.0, trial.output == ANSWER)


def script() -> list[ChatReply]:
    return [
        ChatReply.rate_limited(0.01),
        ChatReply.tools(
            ("echo", {"text": ARGUMENT, "n": 1}),
            ("echo", {"text": ARGUMENT, "n": 2}),
            content=SAID,
            reasoning=THOUGHT,
            usage=(120, 30),
        ),
        ChatReply.failure(502, FAILURE),
        ChatReply.text(ANSWER, reasoning=LAST_THOUGHT, usage=(300, 12)),
    ]


def transcript_run(path: Path, benchmark_id: str = "chat") -> FakeChatServer:
    """Run the benchmark (one task, one trial) into the SQLite store at ``path``; the
    server it asked, closed, with its requests."""
    replies = itertools.chain(script(), itertools.repeat(ChatReply.text("extra")))
    with FakeChatServer(lambda body: next(replies)) as server:
        model = OpenAICompatible(
            "chat-model", base_url=server.url, prices={"input": 0.4, "output": 1.6}
        )
        agent = ToolAgent(model, system_prompt=SYSTEM)
        tasks = {"task": Meta("agent", "env", inputs={"prompt": PROMPT}, model="chat-model")}
        runner = corral.CorralRunner(
            tasks, {"agent": agent}, {"env": Echo()}, store=corral.SQLiteStore(path)
        )
        settings = {"max_retries": 1, "backoff_base": 0.01, "backoff_cap": 0.01}
        anyio.run(lambda: runner.run(benchmark_id, **settings))
    return server


#: What the grader of `rerun_graded_run` is asked and answers (hostile, as text).
GRADER_ASKS = "grade " + HOSTILE[2]
GRADER_SAYS = "GRADE: C " + HOSTILE[3]


def rerun_graded_run(path: Path, benchmark_id: str = "rerun") -> None:
    """A ledger trial refused by its model the first time (an error), rerun
    (``rerun=("error",)``) to its answer, then graded by a model (`model_graded`):
    a transcript with two attempts and a scorer call."""
    from corral import scorers

    from .tool_bench import Ledger, agent, ledger_model, tasks

    replies = iter([ChatReply.failure(400, "refused the first time")])
    with (
        FakeChatServer(lambda body: next(replies, None) or ledger_model(body)) as server,
        FakeChatServer(lambda body: ChatReply.text(GRADER_SAYS, usage=(20, 4))) as grading,
    ):
        judge = scorers.model_graded(
            OpenAICompatible("judge", base_url=grading.url), template=GRADER_ASKS + " {output}"
        )

        class Graded(Ledger):
            evaluate = judge

        async def run(**options: Any) -> None:
            runner = corral.CorralRunner(
                tasks(1),
                {"teller": agent(server.url)},
                {"ledger": Graded()},
                store=corral.SQLiteStore(path),
            )
            await runner.run(benchmark_id, **options)

        anyio.run(run)
        anyio.run(lambda: run(rerun=("error",)))


def cut_run(path: Path, benchmark_id: str = "cut") -> None:
    """Two trials whose model stopped at its token limit (finish_reason "length", as
    OpenAI-compatible servers send it): ``partial`` with part of an answer, ``empty``
    with none."""

    def reply(body: dict[str, Any]) -> HostileReply:
        said = None if "empty" in json.dumps(body["messages"]) else "The answer is"
        message = {"role": "assistant", "content": said}
        return HostileReply.raw({"choices": [{"message": message, "finish_reason": "length"}]})

    with FakeChatServer(reply) as server:
        agent = ToolAgent(OpenAICompatible("cut-model", base_url=server.url))
        tasks = {t: Meta("agent", "env", inputs={"prompt": t}) for t in ("partial", "empty")}
        runner = corral.CorralRunner(
            tasks, {"agent": agent}, {"env": Echo()}, store=corral.SQLiteStore(path)
        )
        anyio.run(lambda: runner.run(benchmark_id))


#: What `interleaved_run`'s model writes around its two tool calls, in this order.
BEFORE, BETWEEN, AFTER = "First A.", "Then B.", "Both asked."
SEARCHED = {"query": "<b>echo</b> semantics"}
FOUND, FOUND_AT = "Echo <i>explained</i>", "https://docs.example/echo?a=1&b=2"


def interleaved_run(path: Path, benchmark_id: str = "mixed") -> None:
    """One ToolAgent trial on Anthropic's API whose first reply writes text before,
    between and after its two tool calls (as Claude may), then answers."""

    def use(n: int) -> dict[str, Any]:
        return {"type": "tool_use", "id": f"toolu_{n}", "name": "echo", "input": {"n": n}}

    text = [{"type": "text", "text": said} for said in (BEFORE, BETWEEN, AFTER)]
    _first_reply_run(path, benchmark_id, [text[0], use(1), text[1], use(2), text[2]])


def web_search_run(path: Path, benchmark_id: str = "searched") -> None:
    """One ToolAgent trial on Anthropic's API whose first reply searches the web (a
    server tool: its use and results among the text) before its tool call."""
    result = {"type": "web_search_result", "url": FOUND_AT, "title": FOUND}
    content = [
        {"type": "text", "text": BEFORE},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": SEARCHED},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": [result]},
        {"type": "text", "text": BETWEEN},
        {"type": "tool_use", "id": "toolu_1", "name": "echo", "input": {"n": 1}},
    ]
    _first_reply_run(path, benchmark_id, content)


def _first_reply_run(path: Path, benchmark_id: str, content: list[dict[str, Any]]) -> None:
    """One ToolAgent trial on Anthropic's API whose first reply's blocks are
    ``content`` (calling ``echo``), then answers."""
    from corral.models import Anthropic
    from corral.testing import FakeAnthropicServer

    first = {"role": "assistant", "content": content, "stop_reason": "tool_use", "usage": {}}
    replies = iter([HostileReply.raw(first), ChatReply.text(ANSWER)])
    with FakeAnthropicServer(lambda body: next(replies)) as server:
        agent = ToolAgent(Anthropic("claude-test", base_url=server.url, api_key="k"))
        tasks = {"task": Meta("agent", "env", inputs={"prompt": PROMPT})}
        runner = corral.CorralRunner(
            tasks, {"agent": agent}, {"env": Echo()}, store=corral.SQLiteStore(path)
        )
        anyio.run(lambda: runner.run(benchmark_id))
