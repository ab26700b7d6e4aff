"""A rate-limit storm over real HTTP: the server answers 429 to every other call for
a while. The run finishes, no attempt is counted failed for a 429, and the model's
effective limit drops, then recovers (seen in `Statistics`)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import corral
from corral.testing import ChatReply, FakeAnthropicServer, FakeChatServer, chat_request

from ..support.tool_bench import Ledger, agent, ledger_model, tasks

pytestmark = pytest.mark.anyio

STORM_CALLS = 30
LIMIT = 8
TASKS = 60


class Storm:
    """429 (retry-after-ms) to every other one of the first calls, then the model."""

    def __init__(self, provider: str) -> None:
        self.provider = provider
        self.lock = threading.Lock()
        self.seen = 0
        self.limited = 0

    def __call__(self, body: dict[str, Any]) -> ChatReply:
        with self.lock:
            self.seen += 1
            storm = self.seen <= STORM_CALLS and self.seen % 2 == 1
            self.limited += storm
        if storm:
            return ChatReply.rate_limited(retry_after_ms=20)
        return ledger_model(body if self.provider == "openai" else chat_request(body))


class Watch:
    def __init__(self) -> None:
        self.info: corral.RunInfo | None = None
        self.effective: list[int] = []

    def on_run_start(self, info: corral.RunInfo) -> None:
        self.info = info

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        assert self.info is not None
        self.effective.append(self.info.statistics().effective_by_model["storm-model"])


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_rate_limit_storm(provider: str) -> None:
    storm = Storm(provider)
    watch = Watch()
    fake = FakeChatServer if provider == "openai" else FakeAnthropicServer
    with fake(storm) as server:
        runner = corral.CorralRunner(
            tasks(TASKS, model="storm-model"),
            {"teller": agent(server.url, provider)},
            {"ledger": Ledger()},
            store=corral.MemoryStore(),
            max_retries=0,  # a 429 counted as a failed attempt would end its trial
        )
        report = await runner.run(
            "storm",
            max_parallel=LIMIT,
            max_parallel_by_model={"storm-model": LIMIT},
            observers=[watch],
        )
    assert storm.limited == STORM_CALLS // 2
    assert server.calls == TASKS * 3 + storm.limited
    assert report.counts["completed"] == TASKS
    assert report.pass_at_k[1] == 1.0
    for task in report.tasks.values():
        assert task.trials[0].attempts == 1 and task.trials[0].error is None
    lowest = min(watch.effective)
    assert lowest <= LIMIT // 2  # dropped...
    assert watch.effective[-1] == LIMIT  # ...and recovered
    assert max(watch.effective) <= LIMIT
