"""Model calls recorded on a Ray host are recorded as in process: once each, with the
failed tries of a rate limit that deferred the trial (its job goes back to the
scheduler and out to a host again, its unrecorded tries with it), and once each
when a host is killed between a call's record and its action's effect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import corral
from corral.history import ModelCallPayload, decode
from corral.testing import ChatReply, FakeChatServer

from ..support.ray_support import Boards, comparable, kill_at_the_gate, through_gate
from ..support.tool_bench import LEDGER_HISTORY, Ledger, agent, ledger_model, tasks

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.usefixtures("ray_cluster"),
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),
]


def _first_limited() -> Any:
    """Each trial's first request is rate limited, then the ledger's script answers."""
    seen: set[str] = set()

    def reply(body: dict[str, Any]) -> ChatReply:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        if user not in seen:
            seen.add(user)
            return ChatReply.rate_limited(0.01)
        return ledger_model(body)

    return reply


async def _calls(store: Path, task: str) -> list[tuple[str, Any]]:
    sqlite = corral.SQLiteStore(store)
    async with sqlite.opened():
        history = await sqlite.history(corral.TrialKey("calls", task, 0))
    out = []
    for commit in history:
        if commit.kind == "model_call":
            call = decode(commit)
            assert isinstance(call, ModelCallPayload)
            out.append(
                (commit.kind, (call.keep, len(call.messages), [f.kind for f in call.failed]))
            )
        else:
            out.append((commit.kind, None))
    return out


async def test_calls_recorded_on_hosts_as_in_process(tmp_path: Path) -> None:
    async def run(name: str, **options: Any) -> corral.BenchmarkReport:
        with FakeChatServer(_first_limited()) as server:
            runner = corral.CorralRunner(
                tasks(3),
                {"teller": agent(server.url)},
                {"ledger": Ledger()},
                store=tmp_path / name,
            )
            report = await runner.run("calls", **options)
            assert server.calls == 3 * 4  # a limited try and three calls a trial
            return report

    local = await run("local.db")
    on_ray = await run("ray.db", executor=corral.RayExecutor(hosts=2))
    assert comparable(on_ray) == comparable(local)
    for task in ("acct-1", "acct-2", "acct-3"):
        recorded = await _calls(tmp_path / "ray.db", task)
        assert recorded == await _calls(tmp_path / "local.db", task)
        calls = [what for kind, what in recorded if kind == "model_call"]
        assert calls == [(0, 2, ["429"]), (2, 2, []), (4, 2, [])]
    counted = on_ray.model_calls["teller-model"]
    assert (counted.calls, dict(counted.failed)) == (9, {"429": 3})
    assert counted.rate_limit_wait > 0


class GatedLedger(Ledger):
    """The ledger, each trial's first tool call waiting at the board's gate."""

    def __init__(self, board: Any) -> None:
        super().__init__()
        self.board = board

    async def execute(self, action: corral.Action, session: corral.AgentSession) -> Any:
        if action.tool == "lookup":
            await through_gate(self.board, session)
        return await super().execute(action, session)


async def test_a_host_killed_after_a_record_lands_records_each_call_once(
    tmp_path: Path, boards: Boards
) -> None:
    gated = boards.get(gate_open=False)
    store = tmp_path / "store.db"
    report: corral.BenchmarkReport | None = None
    with FakeChatServer(ledger_model) as server:
        runner = corral.CorralRunner(
            tasks(2), {"teller": agent(server.url)}, {"ledger": GatedLedger(gated)}, store=store
        )

        async def run() -> None:
            nonlocal report
            report = await runner.run("killed", executor=corral.RayExecutor(hosts=2))

        # Both trials' first calls are recorded with their actions; the tools wait.
        await kill_at_the_gate(run, gated, 2, every=False)
        assert server.calls == 6  # the recorded turn was not asked again
    assert report is not None and report.counts["completed"] == 2
    sqlite = corral.SQLiteStore(store)
    async with sqlite.opened():
        for task in ("acct-1", "acct-2"):
            history = await sqlite.history(corral.TrialKey("killed", task, 0))
            assert [c.kind for c in history] == LEDGER_HISTORY
