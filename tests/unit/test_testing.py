"""`corral.testing`: gates, gauges, fakes and waiting until everything is blocked."""

from __future__ import annotations

import re

import anyio
import anyio.lowlevel
import pytest

from corral import (
    Action,
    BenchmarkTaskMetadata,
    Commit,
    ConfigError,
    Evaluation,
    Final,
    MemoryStore,
    StoreError,
    ToolEffect,
    TrialKey,
    TrialRecord,
)
from corral import TrialStatus as S
from corral.runtime import AgentSession
from corral.testing import (
    ConcurrencyGauge,
    FakeEnvironment,
    FaultStore,
    Gate,
    ScriptedAgent,
    wait_all_tasks_blocked,
)

pytestmark = pytest.mark.anyio


def session(task_id: str = "t", trial: int = 0, model: str | None = "m") -> AgentSession:
    meta = BenchmarkTaskMetadata("a", "e", model=model)
    return AgentSession(benchmark_id="b", task_id=task_id, trial=trial, metadata=meta, inputs={})


async def test_gate_holds_until_opened() -> None:
    gate = Gate()
    passed: list[int] = []

    async def walker(i: int) -> None:
        await gate.wait()
        passed.append(i)

    async with anyio.create_task_group() as tg:
        for i in range(3):
            tg.start_soon(walker, i)
        await wait_all_tasks_blocked()
        assert (passed, gate.waiting, gate.is_open) == ([], 3, False)
        gate.open()
    assert sorted(passed) == [0, 1, 2] and gate.waiting == 0
    await gate.wait()  # an open gate lets later tasks straight through


def test_gate_can_be_made_outside_an_event_loop() -> None:
    assert "closed" in repr(Gate())


async def test_gauge_counts_and_remembers_peaks() -> None:
    gauge = ConcurrencyGauge()
    with gauge.hold("a", ("m", 1)):
        with gauge.hold("a"):
            assert gauge.count("a") == 2 and gauge.current == {"a": 2, ("m", 1): 1}
    with gauge.hold("a"):
        pass
    assert gauge.count("a") == 0 and gauge.current == {}
    assert gauge.peak("a") == 2 and gauge.peaks == {"a": 2, ("m", 1): 1}
    assert gauge.entries["a"] == 3
    gauge.assert_ok()


def test_gauge_limit_breach_is_raised_recorded_and_released() -> None:
    gauge = ConcurrencyGauge({"a": 1})
    with gauge.hold("a"):
        with pytest.raises(AssertionError, match="'a' is held 2 times, over its limit 1"):
            gauge.enter("a")
        assert gauge.count("a") == 1  # the refused hold was given back
    with pytest.raises(AssertionError, match="over its limit"):
        gauge.assert_ok()


def test_gauge_check_runs_at_every_entry() -> None:
    def at_most_three_in_all(g: ConcurrencyGauge) -> None:
        assert sum(g.current.values()) <= 3, f"{g.current} holds more than 3"

    gauge = ConcurrencyGauge(check=at_most_three_in_all)
    gauge.enter("a", "b")
    gauge.enter("c")
    with pytest.raises(AssertionError, match="holds more than 3"):
        gauge.enter("d")
    assert gauge.violations and gauge.current == {"a": 1, "b": 1, "c": 1}


def test_gauge_refuses_unbalanced_exit() -> None:
    with pytest.raises(RuntimeError, match="released more often"):
        ConcurrencyGauge().exit("a")


async def test_scripted_agent_decides_waits_and_gauges() -> None:
    gate = Gate()
    gauge = ConcurrencyGauge()

    async def decide(s: AgentSession) -> Final:
        return Final(f"{s.task_id}/{s.trial}")

    agent = ScriptedAgent(decide, gate=lambda s: gate if s.trial == 0 else None, gauge=gauge)
    results: list[object] = []

    async def act(s: AgentSession) -> None:
        results.append(await agent.act(s))

    async with anyio.create_task_group() as tg:
        tg.start_soon(act, session(trial=0))
        await wait_all_tasks_blocked()
        tg.start_soon(act, session(trial=1))
        await wait_all_tasks_blocked()
        assert results == [Final("t/1")]  # trial 1 has no gate
        assert gauge.current == {"act": 1, ("model", "m"): 1, ("task", "t"): 1}
        gate.open()
    assert results == [Final("t/1"), Final("t/0")] and agent.calls == 2
    assert gauge.peak(("task", "t")) == 2


async def test_scripted_agent_default_is_final_none() -> None:
    assert await ScriptedAgent().act(session()) == Final(None)


async def test_fake_environment_records_gates_and_gauges() -> None:
    gate = Gate()
    execs, evals = ConcurrencyGauge(), ConcurrencyGauge()
    env = FakeEnvironment(
        "shell",
        state=lambda s: {"trial": s.trial},
        effect=lambda a, s: ToolEffect(a.arguments["x"] * 2, state={"x": a.arguments["x"]}),
        evaluate=lambda r: Evaluation(0.5, r.output == "ok"),
        execute_gate=gate,
        evaluate_gate=gate,
        execution_gauge=execs,
        evaluation_gauge=evals,
    )
    s = session(trial=3)
    s.step_key = "step-1"
    assert await env.setup(s) == {"trial": 3}
    effects: list[ToolEffect] = []
    evaluations: list[Evaluation] = []
    record = TrialRecord("t", 3, S.COMPLETED, output="ok")

    async def execute() -> None:
        effects.append(await env.execute(Action("double", {"x": 21}), s))

    async def evaluate() -> None:
        evaluations.append(await env.evaluate(record))

    async with anyio.create_task_group() as tg:
        tg.start_soon(execute)
        tg.start_soon(evaluate)
        await wait_all_tasks_blocked()
        assert execs.current == {"shell": 1} and evals.current == {"shell": 1}
        assert gate.waiting == 2 and not effects and not evaluations
        gate.open()
    assert effects == [ToolEffect(42, state={"x": 21})]
    assert evaluations == [Evaluation(0.5, True)]
    [execution] = env.executions
    assert (execution.task_id, execution.trial, execution.step_key) == ("t", 3, "step-1")
    assert env.evaluated == [record] and env.setups == 1


async def test_fake_environment_defaults() -> None:
    env = FakeEnvironment()
    assert await env.setup(session()) is None
    effect = await env.execute(Action("ls", {"path": "/"}), session())
    assert effect == ToolEffect({"tool": "ls", "arguments": {"path": "/"}})
    assert await env.evaluate(TrialRecord("t", 0, S.COMPLETED)) == Evaluation(1.0, True)
    assert await env.evaluate(TrialRecord("t", 0, S.TIMEOUT)) == Evaluation(0.0, False)


async def test_fake_environment_state_may_be_an_async_function() -> None:
    """As ``effect`` and ``evaluate`` may be async, so may ``state``: its result is the
    state, not a coroutine never awaited."""

    async def state(s: AgentSession) -> dict[str, int]:
        await anyio.lowlevel.checkpoint()
        return {"trial": s.trial}

    env = FakeEnvironment(state=state)
    assert await env.setup(session(trial=2)) == {"trial": 2}


async def test_wait_all_tasks_blocked_lets_runnable_tasks_finish() -> None:
    steps: list[int] = []

    async def busy() -> None:
        for i in range(50):
            steps.append(i)
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(busy)
        await wait_all_tasks_blocked()
        assert len(steps) == 50


async def test_fault_store_fails_the_nth_matching_append_once_before_or_after_it_lands() -> None:
    key, other = TrialKey("b", "t", 0), TrialKey("b", "u", 0)
    terminal = [Commit(0, "terminal", {}, 0.0)]
    for after in (False, True):
        memory = MemoryStore()
        store = FaultStore(memory, kind="terminal", key=key, nth=2, after=after)
        await store.append(other, terminal)  # another trial: not counted
        await store.append(key, [Commit(0, "action", {}, 0.0)])  # another kind: not counted
        await store.append(key, [Commit(1, "terminal", {}, 0.0)])
        assert (store.seen, store.fired) == (1, False)
        with pytest.raises(StoreError, match="injected fault at terminal"):
            await store.append(key, [Commit(2, "terminal", {}, 0.0)])
        assert store.fired
        landed = [c.seq for c in await memory.history(key)]
        assert landed == ([0, 1, 2] if after else [0, 1])
        await store.append(key, [Commit(len(landed), "terminal", {}, 0.0)])  # once only
        assert await store.history(key) == await memory.history(key)


@pytest.mark.parametrize("nth", [0, -1, 1.5, True])
def test_fault_store_refuses_a_bad_nth(nth: object) -> None:
    refused = f"FaultStore nth must be a positive integer, not {nth!r}"
    with pytest.raises(ConfigError, match=refused):
        FaultStore(MemoryStore(), kind="terminal", nth=nth)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["terminl", "Terminal", "", 3, ["terminal"]])
def test_fault_store_refuses_a_kind_no_commit_has(kind: object) -> None:
    """A misspelt kind matches no append: the fault would never fire and the test that
    meant to inject it would pass without it."""
    refused = f"FaultStore kind must be a commit kind .*, got {re.escape(repr(kind))}"
    with pytest.raises(ConfigError, match=refused):
        FaultStore(MemoryStore(), kind=kind)  # type: ignore[arg-type]
