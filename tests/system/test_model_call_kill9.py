"""kill -9 around a model call's record, then resume: each call the trial's history
keeps is recorded exactly once, and each record is a conversation the model was sent.

A call's record lands in the same append as the turn's actions, so there is no
moment between the record and the action: the kills land on either side of that
append (after the reply, before it; after it, before the tool runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio

import corral
from corral.history import CallChain, ModelCallPayload, decode, transcript
from corral.testing import FakeChatServer

from ..support.stepped_child import Acked, run_child_until
from ..support.tool_agent_child import runner
from ..support.tool_bench import LEDGER_HISTORY, balance_of, ledger_model


def _kill_at(store: Path, url: str, kill: Any) -> Acked:
    return run_child_until("tests.support.tool_agent_child", [str(store), url, "replies"], kill)


def _resume_and_check(store: Path, server: FakeChatServer) -> None:
    report = anyio.run(lambda: runner(store, server.url).run("kill"))
    trial = report.tasks["acct-1"].trials[0]
    assert str(trial.status) == "completed" and trial.output == balance_of(1)
    history = anyio.run(lambda: _history(store), backend="asyncio")
    kinds = [c.kind for c in history]
    # One record per turn, each just before what followed from it.
    assert kinds == LEDGER_HISTORY
    calls = transcript(history)
    sent = [request["messages"] for request in server.requests]
    rebuilt = [_whole(history, c.seq) for c in calls]
    # Every record is a conversation the server got, and no two are the same call.
    assert all(messages in sent for messages in rebuilt)
    assert len({repr(m) for m in rebuilt}) == 3
    # The delta stored only what each call added: 2, then 2 more, then 2 more.
    assert [len(c.call.messages) for c in calls] == [2, 2, 2]
    assert [c.call.keep for c in calls] == [0, 2, 4]
    # The report counts the calls the history holds, not the requests made.
    assert report.model_calls["teller-model"].calls == 3


def _whole(history: list[corral.Commit], seq: int) -> list[Any]:
    chain = CallChain()
    for commit in history:
        if commit.kind == "model_call":
            call = decode(commit)
            assert isinstance(call, ModelCallPayload)
            whole = chain.apply(call)
            if commit.seq == seq:
                return whole
    raise AssertionError(seq)


def test_kill9_between_a_reply_and_its_record_asks_again_and_records_once(
    tmp_path: Path,
) -> None:
    store = tmp_path / "store.db"
    with FakeChatServer(ledger_model) as server:
        # The second reply got, not yet recorded: the child dies holding it.
        acked = _kill_at(
            store, server.url, lambda a: sum(1 for x in a if x["kind"] == "replied") == 2
        )
        # (setup and tool effects are told when a later append waits for them)
        told = [a["kind"] for a in acked if a["kind"] in ("replied", "model_call", "action")]
        assert told == ["replied", "model_call", "action", "replied"]
        assert server.calls == 2
        _resume_and_check(store, server)
        # The lost reply's turn was asked again: one request more than the three.
        assert server.calls == 4
        assert server.requests[1]["messages"] == server.requests[2]["messages"]


def test_kill9_after_the_record_and_action_land_does_not_ask_again(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    with FakeChatServer(ledger_model) as server:
        # Killed as the observers hear of the second record: it and its action are
        # durable (one append), the action's tool has not run.
        acked = _kill_at(
            store,
            server.url,
            lambda a: sum(1 for x in a if x["kind"] == "model_call") == 2,
        )
        told = [a["kind"] for a in acked if a["kind"] in ("replied", "model_call", "action")]
        assert told == ["replied", "model_call", "action", "replied", "model_call"]
        assert server.calls == 2
        _resume_and_check(store, server)
        assert server.calls == 3  # the recorded turn was not asked again


async def _history(store: Path) -> list[corral.Commit]:
    sqlite = corral.SQLiteStore(store)
    async with sqlite.opened():
        return await sqlite.history(corral.TrialKey("kill", "acct-1", 0))
