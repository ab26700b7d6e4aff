"""Model calls recorded by a running trial: through `AgentSession.record_model_call`
(an agent calling its model its own way) and `AgentSession.chat` (what `ToolAgent`
uses): once each, with the commit that follows from them, failed tries attached to
the call after them, a call that failed for good before the terminal, the cap."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import anyio
import pytest
from trio.testing import MockClock

import corral
from corral import Action, Final, ModelError
from corral import BenchmarkTaskMetadata as Meta
from corral.history import (
    TRUNCATED,
    CallChain,
    CallCounts,
    ModelCallPayload,
    TranscriptCall,
    decode,
    transcript,
)
from corral.models import ChatResponse
from corral.report._calls import calls_line
from corral.report._stored import stored_report
from corral.scorers import exact
from corral.testing import ChatReply, FakeAnthropicServer, FakeChatServer, FakeEnvironment

from ..support.cancelled_run import cancelled_when, store_of
from ..support.tool_bench import Ledger, agent, ledger_model, tasks

pytestmark = pytest.mark.anyio


def _calls(history: list[corral.Commit]) -> list[ModelCallPayload]:
    out = []
    for commit in history:
        if commit.kind == "model_call":
            call = decode(commit)
            assert isinstance(call, ModelCallPayload)
            out.append(call)
    return out


async def _history(store: corral.CommitStore, bench: str, task: str) -> list[corral.Commit]:
    return await store.history(corral.TrialKey(bench, task, 0))


class OwnWay:
    """An agent that calls its model its own way: two calls a turn, recorded by hand."""

    async def act(self, session: corral.AgentSession) -> Action | Final:
        sent = [{"role": "user", "content": "go"}]
        for step in session.steps:
            sent.append({"role": "tool", "content": str(step.effect.observation)})
        session.record_model_call(sent, text="draft", model="m", latency=0.1, input_tokens=3)
        sent = [*sent, {"role": "assistant", "content": "draft"}, {"role": "user", "content": "?"}]
        session.record_model_call(sent, text="final", model="m", latency=0.2, output_tokens=2)
        if session.iteration < 2:
            return Action("note", {"n": session.iteration})
        return Final("done")


async def test_an_agent_records_its_own_calls_with_the_commit_they_lead_to() -> None:
    report, history = await _one_trial(OwnWay(), "own")
    kinds = [c.kind for c in history]
    assert kinds == [
        "setup",
        *["model_call", "model_call", "action", "tool_effect"] * 2,
        "model_call",
        "model_call",
        "terminal",
        "evaluation",
    ]
    calls = _calls(history)
    # Each stores only what it added: the second of a turn keeps the first's message.
    assert [(c.keep, len(c.messages)) for c in calls] == [
        (0, 1),
        (1, 2),
        (1, 1),
        (2, 2),
        (2, 1),
        (3, 2),
    ]
    assert report.model_calls == {"m": CallCounts(6, {}, 0.0, pytest.approx(0.9))}


class PartlyTimed:
    """An agent that records a call it timed (1 s) and one it did not (no latency)."""

    async def act(self, session: corral.AgentSession) -> Final:
        session.record_model_call(HELLO_SENT, text="timed", model="m", latency=1.0)
        session.record_model_call(HELLO_SENT, text="untimed", model="m")
        return Final("done")


HELLO_SENT = [{"role": "user", "content": "hello"}]


async def test_the_mean_latency_is_of_the_calls_with_a_latency_recorded() -> None:
    """A call recorded without its latency (`record_model_call`'s is optional) says
    nothing of how long calls take: the report's mean latency is over the calls that
    recorded one, not dragged toward 0 by it (1 s and one untimed: 1 s, not 0.5 s)."""
    store = corral.MemoryStore()
    env = FakeEnvironment("env")
    runner = corral.CorralRunner(
        {"t": Meta("own", "env")}, {"own": PartlyTimed()}, {"env": env}, store=store
    )
    report = await runner.run("timed")
    (counts,) = report.model_calls.values()
    assert counts.calls == 2
    assert report.to_dict()["model_calls"]["m"]["mean_latency_seconds"] == 1.0
    assert "1.00 s mean latency" in calls_line("m", counts)
    config = await store.benchmark_config("timed")
    assert config is not None
    reread = await stored_report(store, "timed", config, k_values=(1,))  # from the heads
    assert reread.to_dict()["model_calls"]["m"]["mean_latency_seconds"] == 1.0


class Slow:
    """A user's model that answers after ``SLOW`` seconds (virtual time)."""

    model = "slow"

    async def complete(self, messages: Any, **options: Any) -> ChatResponse:
        await anyio.sleep(SLOW)
        return ChatResponse("late")


#: Seconds `Slow` takes to answer.
SLOW = 2.5


class AsksSlow:
    async def act(self, session: corral.AgentSession) -> Final:
        reply = await session.chat(Slow()).complete(HELLO_SENT)
        return Final(reply.content)


@pytest.mark.parametrize("anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=0)})])
async def test_a_calls_latency_is_timed_on_the_clock_working_time_is() -> None:
    """A call's latency is timed on the event loop's clock, as the trial's working time
    is: in virtual time (a test's MockClock) a 2.5 s call is recorded as 2.5 s, the
    same in every run, not as the instant of real time it took (the trial's and a
    scorer's)."""
    store = corral.MemoryStore()
    runner = corral.CorralRunner(
        {"t": Meta("slow", "env")},
        {"slow": AsksSlow()},
        {"env": FakeEnvironment("env")},
        store=store,
    )
    await runner.run("virtual")
    (call,) = _calls(await _history(store, "virtual", "t"))
    assert call.text == "late" and call.latency == SLOW
    _, scored = await exact().ask(Slow(), HELLO_SENT)
    assert scored.latency == SLOW


class Trims:
    """An agent that keeps its conversation and clears an old tool result in place before
    its second call (as an agent saving context does)."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = [{"role": "user", "content": "go"}]

    async def act(self, session: corral.AgentSession) -> Action | Final:
        if session.iteration == 2:
            self.sent[2]["content"] = "[cleared]"  # the same dict, changed
        if session.iteration:
            self.sent += [
                {"role": "assistant", "content": "look"},
                {"role": "tool", "content": "a long listing"},
            ]
        session.record_model_call(self.sent, text="look", model="m")
        return Action("note", {}) if session.iteration < 2 else Final("done")


async def test_a_message_changed_in_place_is_recorded_as_sent() -> None:
    """The call's delta took a message the agent changed in place for the previous
    call's (the same object), so its record and transcript showed what was no longer
    sent."""
    _, history = await _one_trial(Trims(), "trims")
    chain = CallChain.of(history)
    assert [m["content"] for m in chain.messages] == [
        "go",
        "look",
        "[cleared]",
        "look",
        "a long listing",
    ]


async def _one_trial(
    agent: Any, benchmark_id: str
) -> tuple[corral.BenchmarkReport, list[corral.Commit]]:
    """The report of one trial of ``agent`` (its tool answers "ok") and its history."""
    store = corral.MemoryStore()
    env = FakeEnvironment("env", effect=lambda action, session: corral.ToolEffect("ok"))
    runner = corral.CorralRunner(
        {"t": Meta("own", "env")}, {"own": agent}, {"env": env}, store=store
    )
    report = await runner.run(benchmark_id)
    return report, await _history(store, benchmark_id, "t")


class TrimsAtOnce(Trims):
    """`Trims`, clearing the old tool result as soon as the call that sent it replied
    (in the same turn, before the commit the call's record rides on)."""

    async def act(self, session: corral.AgentSession) -> Action | Final:
        done = await super().act(session)
        if session.iteration == 1:
            self.sent[2]["content"] = "[cleared]"  # the same dict, changed
        return done


async def test_a_message_changed_in_place_after_its_call_is_recorded_as_sent() -> None:
    """A call's record waits for the trial's next commit, and kept the agent's own
    messages until then: one it changed in place in the meantime was recorded as
    changed, though the call sent it whole."""
    _, history = await _one_trial(TrimsAtOnce(), "trims")
    calls = [c for c in transcript(history) if isinstance(c, TranscriptCall)]
    assert [m.text for m in calls[1].sent] == ["a long listing"]  # beside the reply sent back
    chain = CallChain.of(history)
    assert [m["content"] for m in chain.messages] == [
        "go",
        "look",
        "[cleared]",
        "look",
        "a long listing",
    ]


async def test_a_bad_record_is_refused_naming_the_value() -> None:
    session = corral.AgentSession(
        benchmark_id="b", task_id="t", trial=0, metadata=Meta("a", "e"), inputs={}
    )
    with pytest.raises(corral.ConfigError, match="messages must be a list"):
        session.record_model_call("hello")
    with pytest.raises(corral.ConfigError, match="record_chars must be a positive integer"):
        session.record_model_call([], record_chars=0)
    with pytest.raises(corral.ConfigError, match="latency"):
        session.record_model_call([], latency=-1)
    with pytest.raises(corral.ConfigError, match="record_chars"):
        session.chat(object(), record_chars=True)  # type: ignore[arg-type]
    assert session.calls.pending == []


def _scripted(first: list[ChatReply]) -> Any:
    queue = iter(first)

    def reply(body: dict[str, Any]) -> ChatReply:
        return next(queue, None) or ledger_model(body)

    return reply


async def test_failed_tries_ride_on_the_call_after_them_across_retries() -> None:
    store = corral.MemoryStore()
    script = [ChatReply.rate_limited(0.01), ChatReply.failure(503, "busy")]
    with FakeChatServer(_scripted(script)) as server:
        runner = corral.CorralRunner(
            tasks(1), {"teller": agent(server.url)}, {"ledger": Ledger()}, store=store
        )
        report = await runner.run("retry", backoff_base=0.01, backoff_cap=0.01)
    calls = _calls(await _history(store, "retry", "acct-1"))
    assert len(calls) == 3
    first = calls[0].failed
    assert [(f.kind, f.status, f.retry_after) for f in first] == [
        ("429", 429, 0.01),
        ("5xx", 503, None),
    ]
    assert all(f.waited is not None and f.waited >= 0 for f in first)
    assert calls[1].failed == calls[2].failed == ()
    counted = report.model_calls["teller-model"]
    assert (counted.calls, dict(counted.failed)) == (3, {"429": 1, "5xx": 1})
    assert counted.rate_limit_wait == first[0].waited


async def test_a_call_that_fails_for_good_is_recorded_before_the_terminal() -> None:
    store = corral.MemoryStore()
    with FakeChatServer(_scripted([ChatReply.failure(400, "bad request")])) as server:
        runner = corral.CorralRunner(
            tasks(1), {"teller": agent(server.url)}, {"ledger": Ledger()}, store=store
        )
        report = await runner.run("refused")
    history = await _history(store, "refused", "acct-1")
    assert [c.kind for c in history][-2:] == ["model_call", "terminal"]
    (call,) = _calls(history)
    assert call.error is not None and "bad request" in call.error
    assert [f.kind for f in call.failed] == ["error"]
    assert (call.model, call.endpoint) == ("teller-model", server.url + "/chat/completions")
    counted = report.model_calls["teller-model"]
    assert (counted.calls, dict(counted.failed)) == (0, {"error": 1})
    assert str(report.tasks["acct-1"].trials[0].status) == "error"
    assert ModelError.__name__ in call.error
    # The refused prompt is kept: what was sent is what its reader wants to see.
    (told,) = transcript(history)
    sent = [(m.role, m.text) for m in told.sent]
    assert ("system", "You are a bank teller. Use the tools.") in sent
    assert "What is the balance of this account?" in str(sent)


class FailsWithNothingSent:
    """An agent that records a call with its prompt, then one that failed with no
    messages recorded (the agent's own way of calling gave it none to record)."""

    async def act(self, session: corral.AgentSession) -> Action | Final:
        if session.iteration == 0:
            sent = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
            session.record_model_call(sent, text="first", model="m")
            return Action("note", {})
        session.record_model_call([], error="ModelError: refused", model="m")
        return Final("x")


async def test_a_failed_call_with_nothing_sent_shows_no_earlier_message_as_its_own() -> None:
    # Its transcript entry showed the call before's system and user prompts as sent.
    _, history = await _one_trial(FailsWithNothingSent(), "nothing-sent")
    first, failed = transcript(history)
    assert isinstance(first, TranscriptCall) and isinstance(failed, TranscriptCall)
    assert [(m.role, m.text) for m in first.sent] == [("system", "sys"), ("user", "go")]
    assert failed.call.error == "ModelError: refused"
    assert (failed.sent, failed.length) == ((), 0)


class GoesOnAfterNothingSent:
    """`FailsWithNothingSent`, then a call that sends the first one's reply back."""

    async def act(self, session: corral.AgentSession) -> Action | Final:
        sent = [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]
        if session.iteration == 0:
            session.record_model_call(sent, text="first", model="m")
            return Action("note", {})
        session.record_model_call([], error="ModelError: refused", model="m")
        sent += [{"role": "assistant", "content": "first"}, {"role": "user", "content": "again"}]
        session.record_model_call(sent, text="second", model="m")
        return Final("x")


async def test_a_failed_call_with_nothing_sent_leaves_the_reply_before_it_shown_once() -> None:
    """A call that failed with nothing sent is no step of the conversation: the call
    after it, sending the reply before it back, shows that reply once (as that reply),
    not again as a message it sent."""
    _, history = await _one_trial(GoesOnAfterNothingSent(), "nothing-sent")
    *_, after = transcript(history)
    assert isinstance(after, TranscriptCall) and after.call.text == "second"
    assert [(m.role, m.text) for m in after.sent] == [("user", "again")]


async def test_a_long_value_is_cut_at_record_chars_and_marked() -> None:
    store = corral.MemoryStore()
    with FakeChatServer(ledger_model) as server:
        teller = agent(server.url)
        teller = corral.agents.ToolAgent(
            teller.model, system_prompt="x" * 50, parse_final=int, record_chars=20
        )
        runner = corral.CorralRunner(
            tasks(1), {"teller": teller}, {"ledger": Ledger()}, store=store
        )
        await runner.run("cut")
    calls = _calls(await _history(store, "cut", "acct-1"))
    system = calls[0].messages[0]["content"]
    assert system.startswith("x" * 20) and TRUNCATED in system and "30 more" in system
    assert calls[0].truncated >= 1
    # The cut conversation still chains: later calls keep what they share.
    assert [c.keep for c in calls] == [0, 2, 4]


class _HangsOnce(Ledger):
    """Hangs in its second execution (the trial's ``balance``) the first time, until
    cancelled; runs at once after."""

    def __init__(self) -> None:
        super().__init__()
        self.inside = anyio.Event()

    async def execute(self, action: Action, session: corral.AgentSession) -> corral.ToolEffect:
        if len(self.executed) == 1 and not self.inside.is_set():
            self.inside.set()
            await anyio.sleep_forever()
        return await super().execute(action, session)


async def test_a_resumed_trial_with_a_cut_value_stores_and_shows_only_what_its_call_adds(
    tmp_path: Any,
) -> None:
    """A resumed trial's next call was a delta on its previous call as stored: a value
    cut at record_chars there differed from the one sent whole, so the call stored the
    conversation again from it and the transcript showed those messages (the earlier
    replies among them) twice."""
    env = _HangsOnce()
    store = store_of("sqlite", tmp_path)
    with FakeChatServer(ledger_model) as server:
        teller = agent(server.url)
        teller = corral.agents.ToolAgent(
            teller.model, system_prompt="x" * 50, parse_final=int, record_chars=20
        )

        async def run(bench: str) -> Any:
            runner = corral.CorralRunner(tasks(1), {"teller": teller}, {"ledger": env}, store=store)
            return await runner.run(bench)

        await cancelled_when(run, env.inside)
        report = await run("b")
    assert report.tasks["acct-1"].trials[0].output == 107
    async with store.opened():
        history = await _history(store, "b", "acct-1")
    assert [c.keep for c in _calls(history)] == [0, 2, 4]  # as an uninterrupted trial's
    last = transcript(history)[-1]
    assert isinstance(last, TranscriptCall)
    assert [m.role for m in last.sent] == ["tool"]


async def test_the_anthropic_client_records_thinking_and_cache_tokens() -> None:
    store = corral.MemoryStore()
    counter = itertools.count()

    def reply(body: dict[str, Any]) -> ChatReply:
        if next(counter) == 0:
            answer = ChatReply.tools(("lookup", {"account": 1}), reasoning="think", usage=(9, 2))
            return dataclasses.replace(answer, cache=(5, 3))
        last = body["messages"][-1]["content"][-1]
        if "ledger" in str(last.get("content")) and "L1" in str(last.get("content")):
            return ChatReply.tools(("balance", {"ledger": "L1"}))
        return ChatReply.text("107")

    with FakeAnthropicServer(reply) as server:
        runner = corral.CorralRunner(
            tasks(1), {"teller": agent(server.url, "anthropic")}, {"ledger": Ledger()}, store=store
        )
        await runner.run("claude")
    history = await _history(store, "claude", "acct-1")
    first = transcript(history)[0].call
    assert (first.reasoning, first.cache_read_tokens, first.cache_write_tokens) == ("think", 5, 3)
    assert first.input_tokens == 9 + 5 + 3 and first.endpoint == server.url + "/v1/messages"


class FailsFirst:
    """Two recorded calls, then an error on the first run; two calls and an answer after."""

    def __init__(self) -> None:
        self.runs = 0

    async def act(self, session: corral.AgentSession) -> Action | Final:
        self.runs += 1
        for n in range(2):
            sent = [{"role": "user", "content": f"go {n}"}]
            session.record_model_call(sent, text="ok", model="m")
        if self.runs == 1:
            raise ValueError("the first attempt fails")
        return Final("done")


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
async def test_a_rerun_trials_calls_count_every_attempt_as_its_usage_does(
    store_kind: str, tmp_path: Any
) -> None:
    store: Any = corral.MemoryStore() if store_kind == "memory" else tmp_path / "s.db"
    agent_ = FailsFirst()
    env = FakeEnvironment("env")
    runner = corral.CorralRunner({"t": Meta("a", "env")}, {"a": agent_}, {"env": env}, store=store)
    first = await runner.run("b", max_retries=0)
    assert first.model_calls["m"].calls == 2
    again = await runner.run("b", max_retries=0, rerun=("error",))
    [trial] = again.tasks["t"].trials
    assert (str(trial.status), trial.attempts) == ("completed", 1)
    # Four calls were made and paid for; the rerun's transcript starts afresh.
    assert again.model_calls["m"].calls == 4
    assert trial.model_calls is not None and trial.model_calls["m"].calls == 4
