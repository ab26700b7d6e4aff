"""Limits end to end: CorralRunner + MemoryStore, gated fakes, gauges, and blocked moments."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import corral
from corral import (
    Action,
    AgentSession,
    BenchmarkTaskMetadata,
    Commit,
    CorralRunner,
    Evaluation,
    Final,
    MemoryStore,
    RunInfo,
    TrialKey,
    TrialRecord,
    TrialStatus,
)
from corral.testing import (
    ConcurrencyGauge,
    FakeEnvironment,
    Gate,
    ScriptedAgent,
    wait_all_tasks_blocked,
)

from ..support.extra_limit import BY_AGENT, WITH_AGENT
from ..support.limits_model import Model, Scenario, scenarios

pytestmark = pytest.mark.anyio


class Watcher:
    """An observer: counts commits by kind, calls ``then`` on each, keeps the run's statistics."""

    def __init__(self, then: Callable[[TrialKey, Commit], None] = lambda key, commit: None) -> None:
        self.then = then
        self.kinds: dict[str, int] = {}
        self.info: RunInfo | None = None

    def on_run_start(self, info: RunInfo) -> None:
        self.info = info

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        self.kinds[commit.kind] = self.kinds.get(commit.kind, 0) + 1
        self.then(key, commit)

    def executing(self) -> int:
        assert self.info is not None
        return self.info.statistics().executing


def runner(
    tasks: dict[str, BenchmarkTaskMetadata], agent: Any, **environments: Any
) -> CorralRunner:
    return CorralRunner(
        tasks,
        {"a": agent},
        environments or {"e": FakeEnvironment()},
        store=MemoryStore(),
        max_retries=0,
    )


async def test_a_narrow_model_never_idles_the_rest() -> None:
    gate = Gate()
    gauge = ConcurrencyGauge({"act": 8, ("model", "narrow"): 2})
    tasks = {f"n{i}": BenchmarkTaskMetadata("a", "e", model="narrow") for i in range(24)}
    tasks |= {f"w{i}": BenchmarkTaskMetadata("a", "e", model="wide") for i in range(24)}
    watcher = Watcher()
    run = runner(tasks, ScriptedAgent(gate=gate, gauge=gauge)).run
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: run(
                "b", max_parallel=8, max_parallel_by_model={"narrow": 2}, observers=[watcher]
            )
        )
        await wait_all_tasks_blocked()
        # 8 run while the narrow model is saturated: the wide one takes the other 6.
        assert gauge.count("act") == 8
        assert (gauge.count(("model", "narrow")), gauge.count(("model", "wide"))) == (2, 6)
        assert watcher.executing() == 8
        gate.open()
    gauge.assert_ok()
    assert watcher.kinds == {"setup": 48, "terminal": 48, "evaluation": 48}
    assert (gauge.peak("act"), gauge.peak(("model", "narrow"))) == (8, 2)


def _live_sessions() -> int:
    gc.collect()  # live sessions, not garbage awaiting collection
    return sum(1 for o in gc.get_objects() if isinstance(o, AgentSession))


@pytest.mark.parametrize(("tasks", "trials"), [(512, 1), (128, 4)])
async def test_admission_is_bounded_by_the_limits_not_the_trials(
    anyio_backend: str, tasks: int, trials: int
) -> None:
    gate = Gate()
    gauge = ConcurrencyGauge({"act": 8})
    metadata = {f"t{i:03}": BenchmarkTaskMetadata("a", "e") for i in range(tasks)}
    run = runner(metadata, ScriptedAgent(gate=gate, gauge=gauge)).run
    before = len(anyio.get_running_tasks())
    # Sessions an earlier test left (held by its tracebacks) are not this run's.
    sessions_before = _live_sessions()
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: run("b", trials_per_task=trials, max_parallel=8, max_parallel_per_task=trials)
        )
        await wait_all_tasks_blocked()
        assert gauge.count("act") == 8
        # The run, its 8 trials and its acknowledgements: never one task per trial
        # (seeds/004).
        assert len(anyio.get_running_tasks()) - before <= 1 + 8 + 1
        if anyio_backend == "asyncio":
            # The same, plus the test's own tasks (the runner's and this one).
            assert len(asyncio.all_tasks()) <= 2 + 1 + 8 + 1, sorted(
                t.get_name() for t in asyncio.all_tasks()
            )
        assert _live_sessions() - sessions_before <= 8 * 2
        gate.open()
    gauge.assert_ok()


@pytest.mark.parametrize(("trials", "per_task"), [(1, 1), (3, 3)])
async def test_evaluations_that_wait_for_every_execution_do_not_deadlock(
    trials: int, per_task: int
) -> None:
    everything_executed = Gate()
    n = 12 * trials

    def count(key: TrialKey, commit: Commit) -> None:
        if commit.kind == "terminal" and watcher.kinds["terminal"] == n:
            everything_executed.open()

    watcher = Watcher(count)
    env = FakeEnvironment(evaluate_gate=everything_executed)
    tasks = {f"t{i}": BenchmarkTaskMetadata("a", "e") for i in range(12)}
    with anyio.fail_after(30):
        report = await runner(tasks, ScriptedAgent(), e=env).run(
            "b",
            trials_per_task=trials,
            max_parallel=2,
            max_parallel_per_task=per_task,
            observers=[watcher],
        )
    assert report.counts["completed"] == n
    assert all(
        t.evaluation == Evaluation(1.0, True) for r in report.tasks.values() for t in r.trials
    )


async def test_evaluation_limits_are_keyed_by_environment_name() -> None:
    gate = Gate()
    evaluations = ConcurrencyGauge({"grader": 1})
    grader_a, grader_b, plain = (
        FakeEnvironment(name, evaluate_gate=gate, evaluation_gauge=evaluations)
        for name in ("grader", "grader", None)
    )
    tasks = {
        f"{env}{i}": BenchmarkTaskMetadata("a", env) for env in ("ga", "gb", "p") for i in range(3)
    }
    run = runner(tasks, ScriptedAgent(), ga=grader_a, gb=grader_b, p=plain).run
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: run(
                "b",
                max_parallel=9,
                max_parallel_evaluations=4,
                max_parallel_evaluations_by_environment={"grader": 1},
            )
        )
        await wait_all_tasks_blocked()
        # One evaluation named "grader" across two environment ids; the unnamed
        # environment is keyed by its id, unlisted, so only the global limit binds.
        assert evaluations.current == {"grader": 1, None: 3}
        gate.open()
    evaluations.assert_ok()


async def test_a_limit_keyed_by_a_name_no_selected_task_uses_is_accepted() -> None:
    tasks = {
        "t": BenchmarkTaskMetadata("a", "e", model="m"),
        "other": BenchmarkTaskMetadata("a", "e2", model="m2"),
    }
    envs = {"e": FakeEnvironment(), "e2": FakeEnvironment(name="grader")}
    run = corral.CorralRunner(tasks, {"a": ScriptedAgent()}, envs, store=corral.MemoryStore())
    report = await run.run(
        "b",
        task_ids=["t"],
        max_parallel_by_model={"m2": 1},
        max_parallel_by_environment={"e2": 1},
        max_parallel_evaluations_by_environment={"grader": 1},
    )
    assert report.counts["completed"] == 1


async def test_an_evaluation_limit_keyed_by_the_id_of_a_named_environment_is_refused() -> None:
    # Its evaluations are keyed by its name: a cap on its id bounded nothing (3 at once).
    store = corral.MemoryStore()
    tasks = {f"t{i}": BenchmarkTaskMetadata("a", "e") for i in range(3)}
    envs = {"e": FakeEnvironment(name="grader"), "plain": FakeEnvironment()}
    runner = corral.CorralRunner(tasks, {"a": ScriptedAgent()}, envs, store=store)
    refused = r"names 'e'.*environment named 'grader'.*keyed by 'grader'"
    caps = {"e": 1, "plain": 1}
    with pytest.raises(corral.ConfigError, match=refused):
        await runner.run("b", max_parallel_evaluations_by_environment=caps)
    assert await store.benchmarks() == []
    await runner.run("b")
    with pytest.raises(corral.ConfigError, match=refused):
        await runner.rescore("b", max_parallel_evaluations_by_environment=caps)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"max_parallel_by_model": {"gpt-y": 2}}, r"'gpt-y'.*did you mean 'gpt-x'"),
        ({"max_parallel_by_environment": {"calc": 2}}, r"'calc'.*environment id"),
        ({"max_parallel_evaluations_by_environment": {"nobody": 1}}, r"'nobody'.*known: "),
    ],
)
async def test_a_limit_keyed_by_an_unknown_name_is_refused(
    limits: dict[str, dict[str, int]], message: str
) -> None:
    store = corral.MemoryStore()
    run = corral.CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "calculator", model="gpt-x")},
        {"a": ScriptedAgent()},
        {"calculator": FakeEnvironment()},
        store=store,
    )
    with pytest.raises(corral.ConfigError, match=message):
        await run.run("b", **limits)  # type: ignore[arg-type]
    assert await store.benchmarks() == []


# -- the property, end to end ----------------------------------------------


class Problems(list[str]):
    """Assertion failures inside agents, environments and observers, which the run
    would otherwise turn into trial errors (or drop): collected for the test."""

    @contextmanager
    def collect(self) -> Iterator[None]:
        try:
            yield
        except AssertionError as exc:
            self.append(str(exc))
            raise


class LimitsRun:
    """One whole run checked against the reference model: a ``gauge`` held from an
    agent's gated call (or an evaluation's start) until its commit is durable, where
    admission holds the slot, so it checks every limit at every instant; ``events``
    the model settles at each quiet moment, when it asserts work conservation."""

    def __init__(self, scenario: Scenario, model: Model) -> None:
        self.scenario, self.model = scenario, model
        self.gauge = ConcurrencyGauge(model.gauge.limits)
        self.events: list[tuple[str, tuple[str, int], TrialStatus | None]] = []
        self.problems = Problems()
        self.holding: set[tuple[str, tuple[str, int]]] = set()  # what the gauge holds
        self.watcher = Watcher(self.committed)

    async def hold(
        self, kind: str, trial: tuple[str, int], keys: list[Hashable], gate: Gate
    ) -> None:
        with self.problems.collect():
            self.gauge.enter(*keys)
        self.holding.add((kind, trial))
        await gate.wait()

    def committed(self, key: TrialKey, commit: Commit) -> None:
        trial, model, events = (key.task_id, key.trial), self.model, self.events
        if commit.kind == "evaluation":
            if ("eval", trial) in self.holding:
                self.gauge.exit(*model.eval_keys(key.task_id))
            events.append(("evaluated", trial, None))
        elif commit.kind == "terminal":
            status = TrialStatus(commit.payload["status"])
            if status == TrialStatus.UNREACHABLE:
                events.append(("unreachable", trial, None))
                return
            if ("exec", trial) in self.holding:
                self.gauge.exit(*model.exec_keys(key.task_id))
            events.append(("ended", trial, status))
            if status != self.scenario.outcomes[trial]:
                self.problems.append(f"{trial} ended {status}, not {self.scenario.outcomes[trial]}")

    async def drive(
        self,
        run: Callable[..., Any],
        gates: Callable[[], list[Gate]],
        order: list[int],
        quiet: Callable[[], None] = lambda: None,
    ) -> None:
        """Run to its end, at each quiet moment checking the model (after ``quiet``) and
        opening one held gate (``order`` says which); then the run's own checks."""
        finished = False
        model, problems = self.model, self.problems

        async def run_it() -> None:
            nonlocal finished
            await run(
                "b",
                trials_per_task=self.scenario.trials,
                observers=[self.watcher],
                **self.scenario.limit_args,
            )
            finished = True

        async with anyio.create_task_group() as tg:
            tg.start_soon(run_it)
            while not problems:
                await wait_all_tasks_blocked()
                with problems.collect():
                    model.settle(self.events)
                    self.events.clear()
                    quiet()
                    model.assert_work_conserving()
                if finished:
                    break
                held = [gate for gate in gates() if gate.waiting]
                if not held:
                    problems.append(f"the run stalled: {model.gauge.current}")
                    break
                held[order.pop() % len(held) if order else 0].open()
            tg.cancel_scope.cancel()
        assert not problems
        assert model.finished
        self.gauge.assert_ok()


MAX_TASKS, MAX_TRIALS = 5, 3
#: Which held gate to open at each quiet moment (modulo how many are held). Drawn up
#: front: a draw inside a task group would wrap hypothesis' control flow in a group.
ORDERS = st.lists(
    st.integers(0, 63), min_size=2 * MAX_TASKS * MAX_TRIALS, max_size=2 * MAX_TASKS * MAX_TRIALS
)


# 50 scenarios on each backend (each run draws others): 100 whole runs against the model.
@settings(max_examples=50, deadline=None)
@given(scenarios(max_tasks=MAX_TASKS, max_trials=MAX_TRIALS), ORDERS)
async def test_a_run_never_exceeds_a_limit_and_conserves_work(
    scenario: Scenario, order: list[int]
) -> None:
    model = Model(scenario)
    check = LimitsRun(scenario, model)
    runs = {trial: Gate() for trial in scenario.all_trials()}
    scores = {trial: Gate() for trial in scenario.all_trials()}

    async def decide(session: AgentSession) -> Action | Final:
        trial = (session.task_id, session.trial)
        check.events.append(("started", trial, None))
        await check.hold("exec", trial, model.exec_keys(session.task_id), runs[trial])
        outcome = scenario.outcomes[trial]
        if outcome == TrialStatus.ERROR:
            raise RuntimeError("scripted failure")
        return Final("ok") if outcome == TrialStatus.COMPLETED else Action("noop")

    async def evaluate(record: TrialRecord) -> Evaluation:
        trial = (record.task_id, record.trial)
        check.events.append(("evaluating", trial, None))
        await check.hold("eval", trial, model.eval_keys(record.task_id), scores[trial])
        return Evaluation(1.0, record.status == TrialStatus.COMPLETED)

    environments = {
        env: FakeEnvironment(name, evaluate=evaluate) for env, name in scenario.env_names.items()
    }
    run = CorralRunner(
        scenario.tasks,
        {"agent": ScriptedAgent(decide)},
        environments,
        store=MemoryStore(),
        max_retries=0,
    ).run
    await check.drive(run, lambda: [*runs.values(), *scores.values()], order)


async def test_a_limit_declared_in_a_test_is_enforced_and_counted_by_a_run() -> None:
    # A per-agent limit that only `Limits(declarations=...)` knows: a new limit kind
    # is one declaration.
    gate = Gate()
    gauge = ConcurrencyGauge({"act": 8, ("agent", "solo"): 2})
    tasks = {f"s{i}": BenchmarkTaskMetadata("solo", "e") for i in range(12)}
    tasks |= {f"p{i}": BenchmarkTaskMetadata("pair", "e") for i in range(12)}
    agents = {
        name: ScriptedAgent(
            gate=gate, gauge=gauge, keys=lambda s, name=name: ("act", ("agent", name))
        )
        for name in ("solo", "pair")
    }
    limits = corral.Limits.resolve(
        max_parallel=8, declarations=WITH_AGENT, max_parallel_by_agent={"solo": 2}
    )
    watcher = Watcher()
    run = CorralRunner(tasks, agents, {"e": FakeEnvironment()}, store=MemoryStore()).run
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: run("b", corral.RunConfig(limits=limits), observers=[watcher]))
        await wait_all_tasks_blocked()
        assert (gauge.count(("agent", "solo")), gauge.count(("agent", "pair"))) == (2, 6)
        assert watcher.info is not None
        assert watcher.info.statistics().used(BY_AGENT) == {"solo": 2}
        gate.open()
    gauge.assert_ok()
    assert watcher.kinds == {"setup": 24, "terminal": 24, "evaluation": 24}
    assert gauge.peak(("agent", "solo")) == 2
