"""Deterministic testing of agents, environments and runs (modelled on `trio.testing`).

Drive concurrency with gates instead of sleeps, count what runs at once with
gauges, and wait until every task is blocked before asserting::

    gate = Gate()
    gauge = ConcurrencyGauge({"act": 2})
    agent = ScriptedAgent(lambda s: Final("done"), gate=gate, gauge=gauge)
    ...
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.run, "bench")
        await wait_all_tasks_blocked()
        assert gauge.count("act") == 2
        gate.open()
    gauge.assert_ok()
"""

from ._anthropic_server import FakeAnthropicServer, chat_request, thinking_signature
from ._blocked import wait_all_tasks_blocked
from ._chat_server import ChatReply, FakeChatServer, FakeModelServer
from ._fakes import (
    Execution,
    FakeEnvironment,
    ScriptedAgent,
    default_agent_keys,
    echo,
    passed_if_completed,
)
from ._fault_store import FaultStore
from ._gate import Gate
from ._gauge import ConcurrencyGauge
from ._hostile import HostileChatServer, HostileReply, hostile_replies
from ._lagging_store import LaggingStore
from ._tamper import CORRUPTIONS, DELETE, Corruption, json_edit, tamper

__all__ = [
    "CORRUPTIONS",
    "DELETE",
    "ChatReply",
    "ConcurrencyGauge",
    "Corruption",
    "Execution",
    "FakeAnthropicServer",
    "FakeChatServer",
    "FakeEnvironment",
    "FakeModelServer",
    "FaultStore",
    "Gate",
    "HostileChatServer",
    "HostileReply",
    "LaggingStore",
    "ScriptedAgent",
    "chat_request",
    "default_agent_keys",
    "echo",
    "hostile_replies",
    "json_edit",
    "passed_if_completed",
    "tamper",
    "thinking_signature",
    "wait_all_tasks_blocked",
]
