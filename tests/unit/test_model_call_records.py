"""The ``model_call`` commit: its payload encoded and decoded, each call's messages a
delta on the previous call's, strings capped with a visible marker, the counts a
terminal keeps, and the transcript read back."""

from __future__ import annotations

import json
from typing import Any

from corral import Commit
from corral._chat import ToolCall
from corral._types import TrialStatus
from corral.history import (
    TRUNCATED,
    CallChain,
    CallCounts,
    FailedTry,
    ModelCallPayload,
    Stamp,
    TrialFold,
    capped,
    chat_message,
    decode,
    encode,
    model_call,
    model_calls_of,
    terminal,
    transcript,
)

LIMIT = 1000


def _call(keep: int, sent: list[Any], **kw: Any) -> ModelCallPayload:
    return model_call(keep, sent, limit=LIMIT, **kw)


def test_a_model_call_round_trips_through_its_stored_json() -> None:
    tried = FailedTry("429", "RateLimited: slow down", 429, 2.0, 2.5, 100.0)
    call = _call(
        1,
        [{"role": "user", "content": "hi"}],
        model="m",
        endpoint="http://x/v1/chat/completions",
        text="let me look",
        reasoning="I should call lookup",
        tool_calls=(ToolCall("c1", "lookup", '{"a": 1}'), ToolCall("c2", "balance", "{}")),
        finish_reason="tool_calls",
        usage=(10, 5, 0.25, 3, 1),
        latency=0.5,
        failed=(tried,),
    )
    stored = json.loads(json.dumps(encode(call)))  # what a store gives back
    assert decode(Commit(3, "model_call", stored, 1.0)) == call


def test_a_malformed_stored_call_reads_as_defaults_not_an_error() -> None:
    stored = {"keep": -1, "messages": "no", "tool_calls": [1, {"name": 2}], "failed": {}}
    call = decode(Commit(0, "model_call", stored, 1.0))
    assert isinstance(call, ModelCallPayload)
    assert (call.keep, call.messages, call.failed) == (0, (), ())
    assert call.tool_calls == (ToolCall("", "2", ""),)


def test_each_call_stores_only_what_it_adds_to_the_conversation() -> None:
    chain = CallChain()
    first = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    assert chain.delta(first) == (0, first)
    chain.messages = first
    second = [*first, {"role": "assistant", "content": "a"}, {"role": "tool", "content": "t"}]
    # Equal messages rebuilt as new objects count as kept, as the same ones do.
    rebuilt = json.loads(json.dumps(second))
    assert chain.delta(rebuilt) == (2, second[2:])
    # A conversation that changed an earlier message keeps only what precedes it.
    edited = [first[0], {"role": "user", "content": "other"}]
    assert chain.delta(edited) == (1, edited[1:])


def test_the_chain_rebuilds_every_call_from_the_deltas() -> None:
    conversations = [[f"m{i}" for i in range(n)] for n in (2, 4, 6, 3)]
    writer, commits = CallChain(), []
    for seq, sent in enumerate(conversations):
        keep, new = writer.delta(sent)
        writer.messages = sent
        commits.append(Commit(seq, "model_call", encode(_call(keep, new)), 1.0))
    reader = CallChain()
    for commit, sent in zip(commits, conversations, strict=True):
        call = decode(commit)
        assert isinstance(call, ModelCallPayload)
        assert reader.apply(call) == sent
    assert CallChain.of(commits).messages == conversations[-1]
    reopened = [*commits, Commit(9, "reopen", {}, 1.0)]
    assert CallChain.of(reopened).messages == []


def test_a_long_string_is_cut_with_a_visible_marker_and_counted() -> None:
    value, cut = capped({"a": "x" * 50, "b": ["y" * 5, "z" * 12], "c": 1.5, "d": b"raw"}, 10)
    assert cut == 2
    assert value["a"].startswith("x" * 10) and TRUNCATED in value["a"]
    assert "40 more characters" in value["a"]
    assert value["b"][0] == "y" * 5 and "2 more characters" in value["b"][1]
    assert (value["c"], value["d"]) == (1.5, "b'raw'")
    call = model_call(0, [{"content": "q" * 30}], limit=10, text="t" * 20, reasoning="r" * 3)
    assert call.truncated == 2 and call.reasoning == "rrr"
    assert TRUNCATED in call.text and TRUNCATED in call.messages[0]["content"]
    assert encode(call)["truncated"] == 2


def test_a_nested_value_past_the_depth_is_cut_not_a_recursion_error() -> None:
    deep: Any = "leaf"
    for _ in range(500):
        deep = [deep]
    value, cut = capped(deep, 10)
    assert cut == 1
    json.dumps(value)


def test_the_fold_counts_calls_per_model_and_the_terminal_keeps_them() -> None:
    tries = (
        FailedTry("429", "e", 429, 1.0, 1.5, 1.0),
        FailedTry("5xx", "e", 502, None, 0.2, 2.0),
    )
    commits = [
        Commit(0, "model_call", encode(_call(0, ["a"], model="m", latency=1.0)), 1.0),
        Commit(1, "model_call", encode(_call(1, ["b"], model="m", failed=tries, latency=2.0)), 1.0),
        Commit(2, "model_call", encode(_call(0, [], model="n", error="gone", failed=tries)), 1.0),
    ]
    fold = TrialFold.of(commits)
    assert fold.last_call_seq == 2
    assert fold.calls == {
        "m": CallCounts(2, {"429": 1, "5xx": 1}, 1.5, 3.0),
        "n": CallCounts(0, {"429": 1, "5xx": 1}, 1.5, 0.0),
    }
    end = terminal(TrialStatus.COMPLETED, attempts=1)
    stored = json.loads(json.dumps(encode(end, Stamp(calls=fold.calls))))
    assert model_calls_of(Commit(3, "terminal", stored, 1.0)) == fold.calls
    assert model_calls_of(Commit(3, "terminal", {"status": "completed"}, 1.0)) is None
    counted = dict(fold.calls)
    fold.apply(Commit(4, "reopen", {}, 1.0))
    # A reopened trial's earlier calls still count (as its usage does); its next
    # attempt's conversation starts afresh.
    assert fold.calls == counted and fold.last_call_seq is None
    fold.apply(Commit(5, "model_call", encode(_call(0, ["c"], model="m", latency=1.0)), 1.0))
    assert fold.calls["m"].calls == 3 and fold.last_call_seq == 5


def test_the_transcript_shows_each_reply_once_and_names_tool_results() -> None:
    system = {"role": "system", "content": "be brief"}
    user = {"role": "user", "content": "go"}
    echoed = {
        "role": "assistant",
        "content": "looking",
        "tool_calls": [{"id": "k1", "function": {"name": "lookup", "arguments": "{}"}}],
    }
    result = {"role": "tool", "tool_call_id": "k1", "content": "42"}
    first = _call(0, [system, user], text="looking", tool_calls=(ToolCall("x", "lookup", "{}"),))
    second = _call(2, [echoed, result], text="42")
    commits = [
        Commit(1, "model_call", encode(first), 1.0),
        Commit(2, "action", {}, 1.0),
        Commit(3, "model_call", encode(second), 2.0),
    ]
    calls = transcript(commits)
    assert [c.seq for c in calls] == [1, 3]
    assert [m.role for m in calls[0].sent] == ["system", "user"]
    assert [(m.role, m.name, m.text) for m in calls[1].sent] == [("tool", "lookup", "42")]
    assert calls[1].length == 4


def test_a_message_in_anthropics_blocks_reads_as_text_reasoning_and_calls() -> None:
    raw = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "ok"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {"a": 1}},
            {"type": "image", "source": {}},
        ],
    }
    message = chat_message(raw)
    assert (message.role, message.text, message.reasoning) == ("assistant", "ok\n[image]", "hmm")
    assert message.tool_calls == (ToolCall("t1", "f", '{"a": 1}'),)
    assert chat_message("plain").role == "unknown"


def test_a_call_that_failed_with_nothing_sent_leaves_the_chain_as_it_was() -> None:
    chain = CallChain()
    chain.apply(_call(0, ["a", "b"]))
    assert chain.apply(_call(0, [], error="gave up")) == ["a", "b"]
    assert chain.apply(_call(2, ["c"])) == ["a", "b", "c"]
