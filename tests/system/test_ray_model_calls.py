"""Model calls recorded on a Ray host are recorded as in process: once each, with the
failed tries of a rate limit that deferred the trial (its job goes back to the
scheduler and out to a host again, its unrecorded tries with it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import corral
from corral.history import ModelCallPayload, decode
from corral.testing import ChatReply, FakeChatServer

from ..support.ray_support import comparable
from ..support.tool_bench import Ledger, agent, ledger_model, tasks

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
