"""Property: whatever `HostileChatServer` answers, every trial of a ToolAgent run ends
with a recorded status within its time bound, and the run completes (real HTTP on
127.0.0.1): once with every kind of reply at once, then a few mixes from hypothesis."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.models import OpenAICompatible
from corral.testing import ChatReply, HostileChatServer, hostile_replies

from .test_model_malformed import Echo

pytestmark = pytest.mark.anyio

REPLIES: dict[str, Any] = {
    **hostile_replies(bytes_per_second=100, interval=0.01, size=4 * 1024 * 1024),
    "honest": ChatReply.text("done"),
    "honest_tools": ChatReply.tools(("echo", {"x": 1})),
}
#: The replies a trial completes on (content that is an object is kept as JSON).
COMPLETING = {"honest", "object_content"}


def request_timeout(requests: int) -> float:
    """The client's deadline per request for this many requests at once: 25 ms each,
    and at least 0.25 s (25 times the slow replies' pace between bytes). At 0.1 s for
    all twenty at once, an honest reply missed it on a loaded CI machine: they are
    served by threads of this process."""
    return max(0.25, 0.025 * requests)


MAX_RETRIES = 1


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"  # the client on both backends: test_models_waits.py, test_model_malformed.py


def answer(body: dict[str, Any]) -> Any:
    """The reply named by the task (the user turn is the task id: ``N-kind``)."""
    return REPLIES[body["messages"][0]["content"].split("-", 1)[1]]


async def run_all(kinds: list[str]) -> None:
    names = [f"{i}-{kind}" for i, kind in enumerate(kinds)]
    timeout = request_timeout(len(kinds))
    # One attempt's deadline: its three turns' requests, and as much again. A trial's
    # bound: its attempts, each within that deadline, and the scheduler's slack.
    trial_timeout = 4 * timeout
    bound = (MAX_RETRIES + 1) * trial_timeout + 1.0
    with HostileChatServer(answer) as server:
        model = OpenAICompatible(
            "m", base_url=server.url, api_key="", timeout=timeout, max_response_bytes=2**20
        )
        runner = corral.CorralRunner(
            {name: Meta("a", "e", max_iterations=3, inputs={"prompt": name}) for name in names},
            {"a": ToolAgent(model)},
            {"e": Echo()},
            store=corral.MemoryStore(),
            max_retries=MAX_RETRIES,
            backoff_base=0.0,
            trial_timeout=trial_timeout,
            max_rate_limit_wait=0.01,
            max_deferrals=3,
        )
        with anyio.fail_after(len(kinds) * bound):
            report = await runner.run("hostile", max_parallel=len(kinds))
    assert sum(report.counts.values()) == len(kinds)
    for name, task in report.tasks.items():
        (record,) = task.trials
        assert str(record.status) in ("completed", "max_iterations", "error", "timeout"), name
        assert record.started_at is not None and record.finished_at is not None
        assert record.finished_at - record.started_at <= bound, (name, record.error)
        completes = name.split("-", 1)[1] in COMPLETING
        assert (str(record.status) == "completed") == completes, (name, record.error)


async def test_every_kind_of_reply_at_once() -> None:
    await run_all(sorted(REPLIES))


@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(st.lists(st.sampled_from(sorted(REPLIES)), min_size=1, max_size=4))
async def test_any_mix_of_replies(kinds: list[str]) -> None:
    await run_all(kinds)
