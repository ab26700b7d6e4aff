"""kill -9 between a recorded action and its effect, then resume: the model is not
asked again for the recorded turn (the server counts its calls)."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

import corral
from corral.testing import FakeChatServer

from ..support.stepped_child import run_child_until
from ..support.tool_agent_child import runner
from ..support.tool_bench import LEDGER_HISTORY, balance_of, ledger_model


def run_child_until_first(store: Path, url: str, kind: str) -> list[dict[str, object]]:
    """Start a child; SIGKILL it as soon as it acknowledges its first ``kind`` commit."""
    return run_child_until(
        "tests.support.tool_agent_child", [str(store), url], lambda acked: acked[-1]["kind"] == kind
    )


def test_kill9_between_action_and_effect_does_not_ask_the_model_again(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    with FakeChatServer(ledger_model) as server:
        acked = run_child_until_first(store, server.url, "action")
        assert [a["kind"] for a in acked] == ["setup", "model_call", "action"]
        assert server.calls == 1  # the first turn was asked, recorded, not executed

        report = anyio.run(lambda: runner(store, server.url).run("kill"))
        trial = report.tasks["acct-1"].trials[0]
        assert str(trial.status) == "completed" and trial.output == balance_of(1)
        # Uninterrupted, the trial asks three times; the kill added no call.
        assert server.calls == 3
        resumed = server.requests[1]["messages"]
        assert [m["role"] for m in resumed] == ["system", "user", "assistant", "tool"]
        assert resumed[2]["tool_calls"][0]["function"]["name"] == "lookup"
        assert json.loads(resumed[3]["content"]) == {"ledger": "L1"}
    history = anyio.run(lambda: _history(store), backend="asyncio")
    assert [c.kind for c in history] == LEDGER_HISTORY


async def _history(store: Path) -> list[corral.Commit]:
    sqlite = corral.SQLiteStore(store)
    async with sqlite.opened():
        return await sqlite.history(corral.TrialKey("kill", "acct-1", 0))
