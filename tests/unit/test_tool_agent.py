"""`ToolAgent` end to end against `FakeChatServer`: two tool steps, the conversation
rebuilt from the durable history, parallel turns, mistakes as observations,
``max_iterations``, and a retried attempt that sends the identical conversation."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import anyio
import pytest

import corral
from corral import Action, Evaluation, ToolEffect, TrialRecord
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent, call_id
from corral.agents._conversation import REFLECTION
from corral.models import OpenAICompatible
from corral.runtime._trial import load_previous
from corral.testing import ChatReply, FakeChatServer

from ..support.tool_bench import (
    BALANCE,
    LOOKUP,
    Ledger,
    Notes,
    agent,
    balance_of,
    ledger_model,
    tasks,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer(ledger_model) as fake:
        yield fake


async def run(
    server: FakeChatServer, n: int = 3, store: corral.CommitStore | None = None, **kw: Any
) -> tuple[corral.BenchmarkReport, corral.CommitStore, Ledger]:
    env = Ledger()
    store = store or corral.MemoryStore()
    runner = corral.CorralRunner(
        tasks(n), {"teller": agent(server.url)}, {"ledger": env}, store=store, **kw
    )
    return await runner.run("bank", trials_per_task=2, k_values=(1, 2)), store, env


async def test_two_tool_steps_end_to_end(server: FakeChatServer) -> None:
    report, store, env = await run(server)
    assert report.pass_at_k == {1: 1.0, 2: 1.0}
    for i in (1, 2, 3):
        assert [t.output for t in report.tasks[f"acct-{i}"].trials] == [balance_of(i)] * 2
    assert server.calls == 3 * 2 * 3  # three turns per trial, each asked once
    assert len(env.executed) == 3 * 2 * 2
    # Usage and cost per turn: on each action commit, and on the terminal for the answer.
    history = await store.history(corral.TrialKey("bank", "acct-2", 0))
    usage = [(c.kind, c.usage.input_tokens, c.usage.output_tokens) for c in history]
    assert [u for u in usage if u[1]] == [
        ("action", 50, 10),
        ("action", 80, 12),
        ("terminal", 100, 3),
    ]
    trial = report.tasks["acct-2"].trials[0]
    assert trial.usage.cost == pytest.approx(230 / 1e6)
    # The last request: the conversation as the history tells it, ids from step keys.
    actions = [c for c in history if c.kind == "action"]
    seed = agent(server.url).trial_seed(_session("acct-2", 0))
    last = next(
        r["messages"] for r in server.requests if len(r["messages"]) == 6 and r["seed"] == seed
    )
    assert last[0] == {"role": "system", "content": "You are a bank teller. Use the tools."}
    assert last[1]["role"] == "user" and last[1]["content"].startswith("What is the balance")
    ids = [call_id(a.payload["step_key"]) for a in actions]
    assert [m["role"] for m in last[2:]] == ["assistant", "tool", "assistant", "tool"]
    assert last[2]["tool_calls"][0]["id"] == ids[0] and last[3]["tool_call_id"] == ids[0]
    assert last[4]["tool_calls"][0]["function"] == {
        "name": "balance",
        "arguments": '{"ledger": "L2"}',
    }
    assert last[5] == {"role": "tool", "tool_call_id": ids[1], "content": str(balance_of(2))}
    assert all(len(i) == 29 and i.startswith("call_") for i in ids)


def _session(task_id: str, trial: int) -> corral.AgentSession:
    return corral.AgentSession(
        benchmark_id="x", task_id=task_id, trial=trial, metadata=Meta("a", "e"), inputs={}
    )


async def test_trials_get_their_own_seed_and_tools_are_offered(server: FakeChatServer) -> None:
    await run(server, n=1)
    seeds = {r["seed"] for r in server.requests}
    assert len(seeds) == 2  # one per trial, the same on each of its turns
    assert server.requests[0]["tools"] == [LOOKUP.to_openai(), Ledger.tools[1].to_openai()]
    assert server.requests[0]["model"] == "teller-model"  # the task names no model


class Slow:
    """Two tools; ``first`` finishes only after ``second`` (effects land out of order)."""

    tools = (corral.Tool("first"), corral.Tool("second"))

    def __init__(self) -> None:
        self.second_done = anyio.Event()
        self.executed: list[str] = []

    async def setup(self, session: corral.AgentSession) -> Any:
        return None

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        if action.tool == "first":
            await self.second_done.wait()
        else:
            self.second_done.set()
        self.executed.append(action.tool)
        return ToolEffect(f"{action.tool} done")

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return Evaluation(1.0, True)


async def test_parallel_tool_calls_are_one_turn_in_declared_order() -> None:
    script = [
        ChatReply.tools(("first", {}), ("second", {})),
        ChatReply.text("both done"),
    ]
    env = Slow()
    with FakeChatServer(script) as server:
        model = OpenAICompatible("m", base_url=server.url)
        runner = corral.CorralRunner(
            {"t": Meta("a", "e")}, {"a": ToolAgent(model)}, {"e": env}, store=corral.MemoryStore()
        )
        report = await runner.run("par")
    assert report.tasks["t"].trials[0].output == "both done"
    assert env.executed == ["second", "first"]
    messages = server.requests[1]["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
    calls = messages[1]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["first", "second"]
    assert [m["tool_call_id"] for m in messages[2:]] == [c["id"] for c in calls]
    assert [m["content"] for m in messages[2:]] == ["first done", "second done"]


async def test_mistakes_go_back_to_the_model_not_the_environment() -> None:
    script = [
        ChatReply.tools(("transfer", {"to": "me"}), ("lookup", '{"account": 1')),
        ChatReply.tools(("lookup", {"account": "one"}), ("lookup", {"account": 1, "x": 2})),
        ChatReply.tools(("lookup", {"account": 1})),
        ChatReply.text("L1"),
    ]
    env = Ledger()
    with FakeChatServer(script) as server:
        runner = corral.CorralRunner(
            {"t": Meta("a", "e", max_iterations=5)},
            {"a": ToolAgent(OpenAICompatible("m", base_url=server.url))},
            {"e": env},
            store=corral.MemoryStore(),
        )
        report = await runner.run("oops")
        trial = report.tasks["t"].trials[0]
        assert str(trial.status) == "completed" and trial.output == "L1"
        assert env.executed == [("lookup", {"account": 1})]  # only the valid call ran
        observations = [
            m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"
        ]
        first_turn = server.requests[1]["messages"][1]["tool_calls"]
    assert observations[0] == "error: unknown tool 'transfer'; the tools are: lookup, balance"
    assert observations[1].startswith("error: the arguments of 'lookup' are not a valid JSON")
    assert "account must be of type integer, not string" in observations[2]
    assert "unexpected property 'x'" in observations[3]
    assert json.loads(observations[4]) == {"ledger": "L1"}
    # The malformed call is sent back exactly as the model wrote it.
    assert first_turn[1]["function"]["arguments"] == '{"account": 1'


class CutOff(FakeChatServer):
    """Its first reply ran out of tokens in its tool call (``finish_reason`` "length"),
    its arguments as far as they were written: as a gateway in front of Claude sends
    them (the parameters it finished, valid JSON), or cut mid-text."""

    def render(self, request: Mapping[str, Any], reply: ChatReply, number: int) -> bytes:
        body = json.loads(super().render(request, reply, number))
        if number == 1:
            body["choices"][0]["finish_reason"] = "length"
        return json.dumps(body).encode()


@pytest.mark.parametrize("arguments", [{"path": "notes.txt"}, '{"path": "notes.txt", "te'])
async def test_a_tool_call_cut_off_at_the_token_limit_is_not_run(arguments: object) -> None:
    env = Notes()
    with CutOff([ChatReply.tools(("write", arguments)), ChatReply.text("done")]) as server:
        runner = corral.CorralRunner(
            {"t": Meta("a", "e")},
            {"a": ToolAgent(OpenAICompatible("m", base_url=server.url), max_tokens=64)},
            {"e": env},
            store=corral.MemoryStore(),
        )
        report = await runner.run("cut")
    trial = report.tasks["t"].trials[0]
    assert str(trial.status) == "completed" and trial.output == "done", trial.error
    assert env.written == []  # never run with half its arguments
    observation = server.requests[1]["messages"][-1]
    assert observation["role"] == "tool" and observation["content"].startswith("error:")
    assert "token limit" in observation["content"] and "'length'" in observation["content"]


async def test_max_iterations_bounds_a_model_that_never_answers() -> None:
    with FakeChatServer(lambda body: ChatReply.tools(("lookup", {"account": 1}))) as server:
        runner = corral.CorralRunner(
            {"t": Meta("a", "e", max_iterations=3)},
            {"a": ToolAgent(OpenAICompatible("m", base_url=server.url))},
            {"e": Ledger()},
            store=corral.MemoryStore(),
        )
        report = await runner.run("loop")
        assert str(report.tasks["t"].trials[0].status) == "max_iterations"
        assert server.calls == 3


class Flaky(Ledger):
    """Fails the first execution of ``balance`` of each trial (a transient tool error)."""

    def __init__(self) -> None:
        super().__init__()
        self.failed: set[tuple[str, int]] = set()

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        key = (session.task_id, session.trial)
        if action.tool == "balance" and key not in self.failed:
            self.failed.add(key)
            raise ConnectionError("ledger service timed out")
        return await super().execute(action, session)


async def test_a_retried_attempt_sends_the_identical_conversation() -> None:
    with FakeChatServer(ledger_model) as clean_server:
        await run(clean_server, n=2)
        clean = sorted(json.dumps(r, sort_keys=True) for r in clean_server.requests)
    failures = {"left": 2}

    def flaky_model(body: dict[str, Any]) -> ChatReply:
        if len(body["messages"]) == 4 and failures["left"] > 0:  # the second turn, twice
            failures["left"] -= 1
            return ChatReply.failure(503, "overloaded")
        return ledger_model(body)

    env = Flaky()
    with FakeChatServer(flaky_model) as server:
        runner = corral.CorralRunner(
            tasks(2),
            {"teller": agent(server.url)},
            {"ledger": env},
            store=corral.MemoryStore(),
            max_retries=3,
            backoff_base=0.0,
        )
        report = await runner.run("bank", trials_per_task=2, k_values=(1, 2))
        sent = [json.dumps(r, sort_keys=True) for r in server.requests]
    assert report.pass_at_k == {1: 1.0, 2: 1.0}
    assert sum(t.attempts - 1 for task in report.tasks.values() for t in task.trials) == 2 + 4
    # Every request of the faulty run is one the clean run sent: retries repeat them
    # byte for byte, and a tool that failed is re-executed without asking the model.
    assert set(sent) == set(clean)
    assert len(sent) == len(clean) + 2


async def test_bad_agent_arguments_are_refused() -> None:
    model = OpenAICompatible("m", base_url="http://127.0.0.1:9/v1")
    for kwargs in ({"max_tokens": 0}, {"temperature": -1}, {"seed": "x"}, {"parse_final": 3}):
        with pytest.raises(corral.ConfigError):
            ToolAgent(model, **kwargs)
    with pytest.raises(corral.ConfigError, match="complete"):
        ToolAgent(object())  # type: ignore[arg-type]


@pytest.mark.parametrize("reflect", ["no", "false", 1, None])
def test_reflect_that_is_not_true_or_false_is_refused_naming_it(reflect: object) -> None:
    """``reflect`` was read by its truth: ``reflect="no"`` told every trial how its task's
    previous trial scored, a different benchmark from the one asked for."""
    model = OpenAICompatible("m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(corral.ConfigError, match=f"reflect must be True or False, not {reflect!r}"):
        ToolAgent(model, reflect=reflect)  # type: ignore[arg-type]


def test_bad_tools_are_refused_before_anything_runs() -> None:
    with pytest.raises(corral.ConfigError, match="tool name"):
        corral.Tool("has space")
    with pytest.raises(corral.ConfigError, match="parameters"):
        corral.Tool("t", parameters=[1])  # type: ignore[arg-type]

    class Twice(Ledger):
        tools = (LOOKUP, LOOKUP)

    with pytest.raises(corral.ConfigError, match="'lookup' twice"):
        corral.CorralRunner(
            tasks(1), {"teller": agent("http://127.0.0.1:9/v1")}, {"ledger": Twice()}
        )


class PerTask(Ledger):
    """Declares its tools per trial: only ``lookup`` for odd accounts."""

    def tools(self, session: corral.AgentSession) -> tuple[corral.Tool, ...]:  # type: ignore[override]
        return (LOOKUP,) if session.inputs["account"] % 2 else (LOOKUP, BALANCE)


async def test_tools_declared_per_trial(server: FakeChatServer) -> None:
    runner = corral.CorralRunner(
        tasks(2), {"teller": agent(server.url)}, {"ledger": PerTask()}, store=corral.MemoryStore()
    )
    report = await runner.run("per-task")
    odd, even = report.tasks["acct-1"].trials[0], report.tasks["acct-2"].trials[0]
    assert even.output == balance_of(2) and even.passed
    # Account 1 has no balance tool: the call comes back as an error; the model gives up.
    assert str(odd.status) == "completed" and odd.output == 0 and not odd.passed
    last = next(r["messages"] for r in reversed(server.requests) if len(r["tools"]) == 1)
    assert last[-1]["content"] == "error: unknown tool 'balance'; the tools are: lookup"
    assert {len(r["tools"]) for r in server.requests} == {1, 2}


class Resource:
    """Records when the runner enters and leaves its run context."""

    def __init__(self) -> None:
        self.events: list[str] = []

    @contextlib.asynccontextmanager
    async def _context(self, info: corral.RunInfo) -> AsyncIterator[None]:
        self.events.append(f"enter {info.benchmark_id}")
        try:
            yield
        finally:
            self.events.append("exit")

    def run_context(self, info: corral.RunInfo) -> Any:
        return self._context(info)


class ResourcefulLedger(Ledger, Resource):
    def __init__(self) -> None:
        Ledger.__init__(self)
        Resource.__init__(self)


class Signalling:
    """A model that tells when it is first asked."""

    def __init__(self, inner: OpenAICompatible) -> None:
        self.inner = inner
        self.model = inner.model
        self.asked = anyio.Event()

    def run_context(self, info: corral.RunInfo) -> Any:
        return self.inner.run_context(info)

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        self.asked.set()
        return await self.inner.complete(*args, **kwargs)


async def test_run_context_wraps_the_run_even_when_cancelled(server: FakeChatServer) -> None:
    env = ResourcefulLedger()
    model = OpenAICompatible("m", base_url=server.url)
    teller = ToolAgent(model)
    runner = corral.CorralRunner(
        tasks(2), {"teller": teller, "spare": teller}, {"ledger": env}, store=corral.MemoryStore()
    )
    await runner.run("ctx")
    assert env.events == ["enter ctx", "exit"]
    assert model._client is None and model._users == 0

    server._script = lambda body: ChatReply.hang()
    signalling = Signalling(model)
    runner.agents = {"teller": ToolAgent(signalling)}
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.run, "ctx-cancelled")
        await signalling.asked.wait()
        assert model._client is not None and model._users == 1  # one pool, entered once
        tg.cancel_scope.cancel()
    assert env.events[-2:] == ["enter ctx-cancelled", "exit"]
    assert model._client is None and model._users == 0


class _LenientLedger(Ledger):
    """Scores every trial as passed, whatever it answered (or how it ended)."""

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return Evaluation(1.0, True)


async def test_a_reflective_trial_is_not_told_that_an_over_budget_trial_passed() -> None:
    # Trial 0 spends 255 tokens of 200: it ends `limit`, and a `limit` trial never
    # counts as passed, whatever its evaluation says (README, budgets). The next
    # trial was told that it "scored 1 and passed".
    def reflective_model(body: dict[str, Any]) -> ChatReply:
        note = "\n\n" + REFLECTION
        messages = [
            {**m, "content": m["content"].split(note)[0]} if m["role"] == "user" else m
            for m in body["messages"]
        ]
        return ledger_model({**body, "messages": messages})

    with FakeChatServer(reflective_model) as server:
        teller = agent(server.url)
        teller.reflect = True
        store = corral.MemoryStore()
        runner = corral.CorralRunner(
            tasks(1), {"teller": teller}, {"ledger": _LenientLedger()}, store=store
        )
        report = await runner.run("bank", trials_per_task=2, token_limit=200)
    first = report.tasks["acct-1"].trials[0]
    assert (first.status, first.evaluation, first.passed) == ("limit", Evaluation(1.0, True), False)
    told = [r["messages"][1]["content"] for r in server.requests if len(r["messages"]) == 2]
    assert len(told) == 2 and REFLECTION not in told[0]
    note = told[1].rsplit("\n\n", 1)[1]
    assert note.startswith(REFLECTION)
    assert "over its budget" in note and "does not count as passed" in note
    assert "and passed" not in note
    # A resumed trial reads the one it saw from the store: how it ended too.
    seen = await load_previous(store, corral.TrialKey("bank", "acct-1", 1), 0)
    assert seen is not None and seen.status == "limit"
