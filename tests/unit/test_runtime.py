"""One trial: turns, parallel actions, limits on turns and time, usage, JSON, reflection."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping
from typing import Any

import anyio
import pytest
from trio.testing import MockClock

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
    RetryPolicy,
    ToolEffect,
    TrialKey,
    TrialRecord,
    TrialStatus,
)
from corral.scheduler import build_plan
from corral.testing import (
    ConcurrencyGauge,
    FakeEnvironment,
    Gate,
    ScriptedAgent,
    wait_all_tasks_blocked,
)

pytestmark = pytest.mark.anyio

NO_BACKOFF = RetryPolicy(max_retries=0)


def runner(
    agent: Any,
    env: Any,
    *,
    tasks: Mapping[str, BenchmarkTaskMetadata] | None = None,
    policy: RetryPolicy = NO_BACKOFF,
    **kw: Any,
) -> CorralRunner:
    tasks = tasks or {"t": BenchmarkTaskMetadata("a", "e")}
    return CorralRunner(
        tasks, {"a": agent}, {"e": env}, store=MemoryStore(), retry_policy=policy, **kw
    )


async def history(run: CorralRunner, trial: int = 0, task_id: str = "t") -> list[Commit]:
    return await run.store.history(TrialKey("b", task_id, trial))


class Snapshots:
    """What an agent saw at each call, copied (a session changes as the trial goes on)."""

    def __init__(self, decide: Callable[[AgentSession], Any]) -> None:
        self.seen: list[dict[str, Any]] = []
        self.agent = ScriptedAgent(self.record(decide))

    def record(self, decide: Callable[[AgentSession], Any]) -> Callable[[AgentSession], Any]:
        def wrapped(s: AgentSession) -> Any:
            self.seen.append(
                {
                    "trial": s.trial,
                    "attempt": s.attempt,
                    "iteration": s.iteration,
                    "state": s.state,
                    "steps": list(s.steps),
                    "step_key": s.step_key,
                    "kinds": [c.kind for c in s.history],
                    "previous_evaluation": s.previous_evaluation,
                    "previous_state": s.previous_state,
                }
            )
            return decide(s)

        return wrapped


def add(action: Action, s: AgentSession) -> ToolEffect:
    total = s.state["total"] + action.arguments["n"]
    return ToolEffect({"added": action.arguments["n"]}, state={"total": total})


async def test_turns_are_recorded_one_commit_each_in_order() -> None:
    def decide(s: AgentSession) -> Action | Final:
        return Action("add", {"n": s.iteration + 1}) if s.iteration < 2 else Final(s.state)

    snap = Snapshots(decide)
    env = FakeEnvironment(state={"total": 0}, effect=add)
    run = runner(snap.agent, env)
    report = await run.run("b")
    [trial] = report.tasks["t"].trials
    assert (trial.status, trial.output, trial.evaluation) == (
        TrialStatus.COMPLETED,
        {"total": 3},
        Evaluation(1.0, True),
    )
    assert (trial.attempts, trial.commits) == (1, 7)  # every commit, the evaluation too

    commits = await history(run)
    assert [c.seq for c in commits] == list(range(7))
    assert [c.kind for c in commits] == [
        "setup",
        "action",
        "tool_effect",
        "action",
        "tool_effect",
        "terminal",
        "evaluation",
    ]
    assert commits[1].payload["arguments"] == {"n": 1}
    assert commits[5].payload["status"] == "completed"

    assert [s["iteration"] for s in snap.seen] == [0, 1, 2]
    assert [s["state"] for s in snap.seen] == [{"total": 0}, {"total": 1}, {"total": 3}]
    assert [len(s["steps"]) for s in snap.seen] == [0, 1, 2]
    assert snap.seen[2]["steps"][1].action == Action("add", {"n": 2})
    assert snap.seen[2]["steps"][1].effect == ToolEffect({"added": 2}, state={"total": 3})
    assert snap.seen[1]["kinds"] == ["setup", "action", "tool_effect"]
    assert {s["step_key"] for s in snap.seen} == {None}  # a key only inside execute

    keys = [e.step_key for e in env.executions]
    assert keys == [commits[1].payload["step_key"], commits[3].payload["step_key"]]
    assert len(set(keys)) == 2 and all(keys)


async def test_parallel_actions_run_together_and_apply_in_declared_order() -> None:
    gates = {k: Gate() for k in "abc"}
    gauge = ConcurrencyGauge()
    seen_state: dict[str, Any] = {}
    keys: dict[str, str | None] = {}

    def effect(action: Action, s: AgentSession) -> ToolEffect:
        k = action.arguments["k"]
        seen_state[k], keys[k] = s.state, s.step_key
        return ToolEffect(f"did {k}", state={"last": k})

    def decide(s: AgentSession) -> list[Action] | Final:
        if s.iteration == 0:
            return [Action("w", {"k": k}) for k in "abc"]
        return Final([step.effect.observation for step in s.steps])

    snap = Snapshots(decide)
    env = FakeEnvironment(
        state={"last": None},
        effect=effect,
        execute_gate=lambda a, s: gates[a.arguments["k"]],
        execution_gauge=gauge,
    )
    run = runner(snap.agent, env)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run.run, "b")
        await wait_all_tasks_blocked()
        assert gauge.count(None) == 3  # the turn's actions execute at once
        for k in "cba":  # finish in reverse
            gates[k].open()
            await wait_all_tasks_blocked()
    [trial] = await run.store.summaries("b")
    assert trial.terminal is not None
    assert trial.terminal.payload["output"] == ["did a", "did b", "did c"]
    # Each action saw the state at the start of the turn; the last declared state wins.
    assert seen_state == {k: {"last": None} for k in "abc"}
    assert snap.seen[1]["state"] == {"last": "c"}
    assert snap.seen[1]["iteration"] == 1  # a list of actions is one turn
    commits = await history(run)
    actions = [c for c in commits if c.kind == "action"]
    assert [c.seq for c in actions] == [1, 2, 3]
    assert [c.payload["step_key"] for c in actions] == [keys[k] for k in "abc"]
    effects = [c for c in commits if c.kind == "tool_effect"]
    assert [c.payload["action_seq"] for c in effects] == [3, 2, 1]  # in completion order


async def test_max_iterations_ends_the_trial_without_asking_again() -> None:
    agent = ScriptedAgent(lambda s: Action("noop"))
    env = FakeEnvironment()
    tasks = {"t": BenchmarkTaskMetadata("a", "e", max_iterations=3)}
    report = await runner(agent, env, tasks=tasks).run("b")
    [trial] = report.tasks["t"].trials
    assert agent.calls == 3 and len(env.executions) == 3
    assert trial.status == TrialStatus.MAX_ITERATIONS and trial.output is None
    assert trial.evaluation == Evaluation(0.0, False)  # evaluated, and not passed
    assert trial.commits == 1 + 3 * 2 + 1 + 1


async def test_usage_is_stored_with_each_step_and_summed() -> None:
    def decide(s: AgentSession) -> Action | Final:
        s.record_usage(input_tokens=10, output_tokens=5, cost=0.25)
        return Action("x") if s.iteration == 0 else Final("done")

    def setup(s: AgentSession) -> dict[str, int]:
        s.record_usage(input_tokens=1)
        return {}

    def effect(action: Action, s: AgentSession) -> ToolEffect:
        s.record_usage(cost=0.5)
        return ToolEffect("ok")

    run = runner(ScriptedAgent(decide), FakeEnvironment(state=setup, effect=effect))
    report = await run.run("b", trials_per_task=2, max_parallel_per_task=2)
    per_commit = {c.kind: c.usage for c in await history(run)}
    assert per_commit["setup"].input_tokens == 1
    assert (per_commit["action"].input_tokens, per_commit["action"].cost) == (10, 0.25)
    assert (per_commit["tool_effect"].input_tokens, per_commit["tool_effect"].cost) == (0, 0.5)
    assert per_commit["terminal"].output_tokens == 5
    for trial in report.tasks["t"].trials:
        assert (trial.usage.input_tokens, trial.usage.output_tokens) == (21, 10)
        assert trial.usage.cost == pytest.approx(1.0)
    assert (report.usage.input_tokens, report.usage.output_tokens) == (42, 20)
    assert report.usage.cost == pytest.approx(2.0)
    assert report.to_dict()["usage"] == {"input_tokens": 42, "output_tokens": 20, "cost": 2.0}


async def test_a_failed_execution_is_retried_with_the_same_step_key() -> None:
    def effect(action: Action, s: AgentSession) -> ToolEffect:
        if s.attempt == 0:
            raise ConnectionError("flaky tool")
        return ToolEffect("ok")

    agent = ScriptedAgent(lambda s: Action("x") if s.iteration == 0 else Final("done"))
    env = FakeEnvironment(effect=effect)
    report = await runner(agent, env, policy=RetryPolicy(max_retries=1, backoff_base=0)).run("b")
    [trial] = report.tasks["t"].trials
    assert (trial.status, trial.attempts) == (TrialStatus.COMPLETED, 2)
    assert agent.calls == 2  # the recorded action was executed again, not asked for again
    first, second = env.executions
    assert (first.attempt, second.attempt) == (0, 1)
    assert first.step_key == second.step_key is not None


async def test_exhausted_retries_end_in_error_naming_the_last_exception() -> None:
    def decide(s: AgentSession) -> Final:
        raise RuntimeError(f"boom {s.attempt}")

    env = FakeEnvironment()
    run = runner(ScriptedAgent(decide), env, policy=RetryPolicy(max_retries=2, backoff_base=0))
    [trial] = (await run.run("b")).tasks["t"].trials
    assert (trial.status, trial.attempts) == (TrialStatus.ERROR, 3)
    assert trial.error == "RuntimeError: boom 2"
    assert trial.evaluation is None and not trial.passed and env.evaluated == []


async def test_an_evaluation_that_keeps_failing_leaves_none_and_names_the_error() -> None:
    def evaluate(record: TrialRecord) -> Evaluation:
        raise ValueError("grader down")

    env = FakeEnvironment(evaluate=evaluate)
    run = runner(ScriptedAgent(), env, policy=RetryPolicy(max_retries=1, backoff_base=0))
    report = await run.run("b")
    [trial] = report.tasks["t"].trials
    assert trial.status == TrialStatus.COMPLETED and len(env.evaluated) == 2
    assert trial.evaluation is None and not trial.passed
    assert trial.error is not None and "ValueError: grader down" in trial.error
    assert report.pass_at_k == {1: 0.0}


async def test_an_agent_returning_nonsense_fails_the_attempt() -> None:
    run = runner(ScriptedAgent(lambda s: "nonsense"), FakeEnvironment())  # type: ignore[arg-type, return-value]
    [trial] = (await run.run("b")).tasks["t"].trials
    assert trial.status == TrialStatus.ERROR and "'nonsense'" in str(trial.error)


# -- values that do not survive JSON are refused when recorded -------------

BAD = {1, 2}  # a set: not JSON


def final(output: Any) -> Callable[[AgentSession], Any]:
    return lambda s: Action("x") if s.iteration == 0 else Final(output)


@pytest.mark.parametrize(
    ("agent", "env", "named"),
    [
        (final("ok"), {"state": {"s": BAD}}, "the state returned by setup['s'] is {1, 2}"),
        (lambda s: Action("x", {"a": BAD}), {}, "the arguments of 'x'['a'] is {1, 2}"),
        (final("ok"), {"effect": lambda a, s: ToolEffect(BAD)}, "the observation of 'x' is {1, 2}"),
        (
            final("ok"),
            {"effect": lambda a, s: ToolEffect("o", state=float("nan"))},
            "the state after 'x' is nan",
        ),
        (final(b"raw"), {}, "the Final output is b'raw'"),
        (final({1: "one"}), {}, "the Final output has key 1 of type int"),
    ],
    ids=["setup-state", "arguments", "observation", "effect-state", "output", "key"],
)
async def test_a_value_that_is_not_json_fails_the_attempt_naming_it(
    agent: Callable[[AgentSession], Any], env: dict[str, Any], named: str
) -> None:
    fake = ScriptedAgent(agent)
    run = runner(fake, FakeEnvironment(**env), policy=RetryPolicy(max_retries=1, backoff_base=0))
    [trial] = (await run.run("b")).tasks["t"].trials
    # Retried like any exception (SPEC 1): the agent may answer otherwise next time.
    assert (trial.status, trial.attempts) == (TrialStatus.ERROR, 2)
    assert trial.error is not None and trial.error.startswith("NotSerializableError")
    assert named in trial.error
    for commit in await history(run):  # nothing unrecordable reached the store
        assert json.loads(json.dumps(commit.payload, allow_nan=False)) == commit.payload


@pytest.mark.parametrize(
    "error",
    [TypeError("act() takes 1 argument"), corral.ConfigError("bad"), RuntimeError("flaky")],
    ids=["TypeError", "ConfigError", "RuntimeError"],
)
async def test_only_corral_configuration_errors_are_not_retried(error: Exception) -> None:
    def fail(session: AgentSession) -> Any:
        raise error

    policy = RetryPolicy(max_retries=2, backoff_base=0)
    run = runner(ScriptedAgent(fail), FakeEnvironment(), policy=policy)
    [trial] = (await run.run("b")).tasks["t"].trials
    expected = 1 if isinstance(error, corral.ConfigError) else 3
    assert (trial.status, trial.attempts) == (TrialStatus.ERROR, expected)
    assert trial.error == f"{type(error).__name__}: {error}"


async def test_evaluation_details_that_are_not_json_leave_no_evaluation() -> None:
    env = FakeEnvironment(evaluate=lambda r: Evaluation(1.0, True, {"why": BAD}))
    [trial] = (await runner(ScriptedAgent(), env).run("b")).tasks["t"].trials
    assert trial.evaluation is None and not trial.passed
    assert "Evaluation.details['why'] is {1, 2}" in str(trial.error)


async def test_what_a_refused_evaluation_spent_is_counted_on_every_retry() -> None:
    # A graded-by-model scorer paid for each call, though its details could not be
    # recorded: retried (SPEC 1), every call's usage still counts.
    spent = corral.Usage(10, 2, 0.5)
    env = FakeEnvironment(evaluate=lambda r: Evaluation(1.0, True, {"why": BAD}, usage=spent))
    policy = RetryPolicy(max_retries=2, backoff_base=0)
    [trial] = (await runner(ScriptedAgent(), env, policy=policy).run("b")).tasks["t"].trials
    assert trial.evaluation is None and "Evaluation.details" in str(trial.error)
    assert trial.usage == corral.Usage(30, 6, 1.5)


async def test_a_parallel_action_that_is_not_json_is_named() -> None:
    agent = ScriptedAgent(lambda s: [Action("x"), Action("y")])
    env = FakeEnvironment(effect=lambda a, s: ToolEffect(BAD if a.tool == "y" else "fine"))
    [trial] = (await runner(agent, env).run("b")).tasks["t"].trials
    assert trial.status == TrialStatus.ERROR
    assert "the observation of 'y' is {1, 2}" in str(trial.error)


# -- reflective trials (README) --------------------------------------------


def reflective_env(log: list[tuple[str, int]], **kw: Any) -> FakeEnvironment:
    def setup(s: AgentSession) -> dict[str, Any]:
        log.append(("setup", s.trial))
        return {"trial": s.trial}

    def evaluate(r: TrialRecord) -> Evaluation:
        log.append(("evaluate", r.trial))
        return Evaluation(float(r.trial), r.trial % 2 == 0, {"trial": r.trial})

    return FakeEnvironment(
        state=setup,
        effect=lambda a, s: ToolEffect("ok", state={**s.state, "marked": True}),
        evaluate=evaluate,
        **kw,
    )


async def test_sequential_trials_follow_the_previous_evaluation_and_see_it() -> None:
    log: list[tuple[str, int]] = []
    snap = Snapshots(lambda s: Action("mark") if s.iteration == 0 else Final(s.trial))
    await runner(snap.agent, reflective_env(log)).run("b", trials_per_task=3, max_parallel=8)
    assert log == [
        ("setup", 0),
        ("evaluate", 0),
        ("setup", 1),
        ("evaluate", 1),
        ("setup", 2),
        ("evaluate", 2),
    ]
    first = [s for s in snap.seen if s["iteration"] == 0]
    assert [s["previous_evaluation"] for s in first] == [
        None,
        Evaluation(0.0, True, {"trial": 0}),
        Evaluation(1.0, False, {"trial": 1}),
    ]
    assert [s["previous_state"] for s in first] == [
        None,
        {"trial": 0, "marked": True},
        {"trial": 1, "marked": True},
    ]


@pytest.mark.parametrize(
    ("total", "sees"),
    [(None, None), (2, Evaluation(1.0, False, {"trial": 1}))],
    ids=["starts-before-the-evaluation", "starts-after-the-evaluation"],
)
async def test_overlapping_trials_see_the_latest_evaluation_finished_when_they_start(
    total: int | None, sees: Evaluation | None
) -> None:
    log: list[tuple[str, int]] = []
    gates = {r: Gate() for r in range(3)}
    scored = Gate()
    gauge = ConcurrencyGauge()
    snap = Snapshots(lambda s: Final(s.trial))
    agent = ScriptedAgent(snap.agent.decide, gate=lambda s: gates[s.trial], gauge=gauge)
    # With a total of 2 the evaluation of trial 1 goes before trial 2 can start;
    # without, trial 2 starts while that evaluation is held.
    env = reflective_env(log, evaluate_gate=scored if total is None else None)
    run = runner(agent, env).run
    async with anyio.create_task_group() as tg:
        tg.start_soon(
            lambda: run(
                "b",
                trials_per_task=3,
                max_parallel=8,
                max_parallel_per_task=2,
                max_parallel_total=total,
            )
        )
        await wait_all_tasks_blocked()
        assert gauge.count(("task", "t")) == 2  # trials 0 and 1 overlap
        gates[1].open()
        await wait_all_tasks_blocked()
        assert gates[2].waiting == 1  # trial 2 has started
        for gate in (*gates.values(), scored):
            gate.open()
    previous = {s["trial"]: s["previous_evaluation"] for s in snap.seen}
    assert previous == {0: None, 1: None, 2: sees}


async def test_a_resumed_trial_never_sees_a_later_trial_as_previous() -> None:
    tasks = {"t": BenchmarkTaskMetadata("a", "e")}
    store = MemoryStore()
    # An earlier run finished trials 0 and 2 and died before trial 1 wrote anything.
    plan = build_plan(tasks, None, include_dependencies=True, trials_per_task=3)
    await store.register_benchmark("b", plan.config())
    for r in (0, 2):
        await store.append(
            TrialKey("b", "t", r),
            [
                Commit(0, "setup", {"state": {"trial": r}, "previous_trial": None}, 0.0),
                Commit(
                    1,
                    "terminal",
                    {
                        "status": "completed",
                        "output": r,
                        "error": None,
                        "attempts": 1,
                        "state": {"trial": r},
                    },
                    0.0,
                ),
                Commit(
                    2, "evaluation", {"score": 1.0, "passed": True, "details": {"trial": r}}, 0.0
                ),
            ],
        )
    snap = Snapshots(lambda s: Final(s.trial))
    run = CorralRunner(tasks, {"a": snap.agent}, {"e": FakeEnvironment()}, store=store)
    await run.run("b", trials_per_task=3, max_parallel_per_task=2)
    [seen] = snap.seen
    assert seen["trial"] == 1
    assert seen["previous_evaluation"] in (None, Evaluation(1.0, True, {"trial": 0}))


# -- virtual time: timeouts and backoff ------------------------------------


class TestVirtualTime:
    @pytest.fixture
    def anyio_backend(self) -> tuple[str, dict[str, Any]]:
        return ("trio", {"clock": MockClock(autojump_threshold=0)})

    async def test_an_attempt_that_outlives_trial_timeout_ends_timeout_unretried(self) -> None:
        async def decide(s: AgentSession) -> Final:
            await anyio.sleep(3600)
            return Final("too late")

        agent = ScriptedAgent(decide)
        env = FakeEnvironment()
        policy = RetryPolicy(max_retries=2, backoff_base=1)
        start = anyio.current_time()
        report = await runner(agent, env, policy=policy, trial_timeout=60).run("b")
        assert anyio.current_time() - start == pytest.approx(60)
        [trial] = report.tasks["t"].trials
        assert (trial.status, trial.attempts, agent.calls) == (TrialStatus.TIMEOUT, 1, 1)
        assert "trial_timeout of 60" in str(trial.error)
        assert trial.evaluation == Evaluation(0.0, False) and len(env.evaluated) == 1

    async def test_an_attempt_whose_cleanup_raises_when_cut_by_trial_timeout_ends_timeout(
        self,
    ) -> None:
        # A tool's cleanup that fails as the timeout cancels it (a killed process, a
        # closed connection) leaves with its own error: the attempt still outlived
        # trial_timeout, so it ends `timeout`, unretried.
        async def decide(s: AgentSession) -> Final:
            try:
                await anyio.sleep(3600)
            finally:
                raise ConnectionError("connection closed while cleaning up")
            return Final("too late")

        agent = ScriptedAgent(decide)
        policy = RetryPolicy(max_retries=2, backoff_base=1)
        start = anyio.current_time()
        run = runner(agent, FakeEnvironment(), policy=policy, trial_timeout=60)
        report = await run.run("b")
        assert anyio.current_time() - start == pytest.approx(60)
        [trial] = report.tasks["t"].trials
        assert (trial.status, trial.attempts, agent.calls) == (TrialStatus.TIMEOUT, 1, 1)
        assert "trial_timeout of 60" in str(trial.error)

    @pytest.mark.parametrize(("given", "bound"), [({"evaluation_timeout": 30}, 30), ({}, 60)])
    async def test_a_hung_scorer_is_bounded_by_evaluation_timeout(
        self, given: dict[str, float], bound: float
    ) -> None:
        async def hang(trial: TrialRecord) -> Evaluation:
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

        env = FakeEnvironment(evaluate=hang)
        policy = RetryPolicy(max_retries=2, backoff_base=1)
        start = anyio.current_time()
        run = runner(ScriptedAgent(final("ok")), env, policy=policy, trial_timeout=60, **given)
        report = await run.run("b")
        assert anyio.current_time() - start == pytest.approx(bound)  # once: not retried
        [trial] = report.tasks["t"].trials
        assert (trial.status, trial.evaluation) == (TrialStatus.COMPLETED, None)
        assert trial.evaluation_error == (
            f"TimeoutError: evaluate() exceeded evaluation_timeout of {bound} s"
        )

    async def test_a_runs_trial_timeout_is_its_evaluation_timeout_unless_one_is_given(
        self,
    ) -> None:
        # The runner's trial_timeout of 5 s is not an evaluation_timeout: a run that sets
        # trial_timeout=100 and none for evaluate bounds a scorer by 100 s, as documented.
        async def slow(trial: TrialRecord) -> Evaluation:
            await anyio.sleep(50)
            return Evaluation(1.0, True)

        env = FakeEnvironment(evaluate=slow)
        run = runner(ScriptedAgent(final("ok")), env, trial_timeout=5)
        report = await run.run("b", trial_timeout=100)
        [trial] = report.tasks["t"].trials
        assert (trial.evaluation, trial.evaluation_error) == (Evaluation(1.0, True), None)

    async def test_a_scorer_whose_cleanup_raises_when_cut_by_evaluation_timeout_times_out(
        self,
    ) -> None:
        calls: list[float] = []

        async def hang(trial: TrialRecord) -> Evaluation:
            calls.append(anyio.current_time())
            try:
                await anyio.sleep_forever()
            finally:
                raise ConnectionError("grader connection closed while cleaning up")

        env = FakeEnvironment(evaluate=hang)
        policy = RetryPolicy(max_retries=2, backoff_base=1)
        start = anyio.current_time()
        run = runner(ScriptedAgent(final("ok")), env, policy=policy, evaluation_timeout=30)
        report = await run.run("b")
        assert anyio.current_time() - start == pytest.approx(30)  # once: not retried
        [trial] = report.tasks["t"].trials
        assert (len(calls), trial.evaluation) == (1, None)
        assert trial.evaluation_error == (
            "TimeoutError: evaluate() exceeded evaluation_timeout of 30 s"
        )

    async def test_an_attempts_own_error_past_a_deadline_it_never_met_is_an_error(self) -> None:
        # A call the deadline cannot interrupt (a thread, a shielded wait) returns past
        # trial_timeout and the agent then fails on its own: no cancellation reached it
        # (a Final there would complete), so it is the attempt's error, retried as any.
        async def decide(s: AgentSession) -> Final:
            with anyio.CancelScope(shield=True):
                await anyio.sleep(70)
            if s.attempt == 0:
                raise ValueError("the agent's own bug")
            return Final("ok")

        agent = ScriptedAgent(decide)
        policy = RetryPolicy(max_retries=1, backoff_base=1)
        report = await runner(agent, FakeEnvironment(), policy=policy, trial_timeout=60).run("b")
        [trial] = report.tasks["t"].trials
        assert (trial.status, trial.attempts, agent.calls) == (TrialStatus.COMPLETED, 2, 2)

    async def test_a_scorers_own_error_past_a_deadline_it_never_met_is_retried(self) -> None:
        calls: list[float] = []

        async def grade(trial: TrialRecord) -> Evaluation:
            calls.append(anyio.current_time())
            with anyio.CancelScope(shield=True):
                await anyio.sleep(40)
            if len(calls) == 1:
                raise ConnectionError("grader refused")
            return Evaluation(1.0, True)

        env = FakeEnvironment(evaluate=grade)
        policy = RetryPolicy(max_retries=1, backoff_base=1)
        run = runner(ScriptedAgent(final("ok")), env, policy=policy, evaluation_timeout=30)
        report = await run.run("b")
        [trial] = report.tasks["t"].trials
        assert (len(calls), trial.evaluation, trial.evaluation_error) == (
            2,
            Evaluation(1.0, True),
            None,
        )

    async def test_retries_back_off_exponentially_with_jitter(self) -> None:
        async def decide(s: AgentSession) -> Final:
            if s.attempt < 3:
                raise ConnectionError("try later")
            return Final("ok")

        policy = RetryPolicy(max_retries=3, backoff_base=10, backoff_cap=25, rng=random.Random(7))
        twin = random.Random(7)
        expected = sum(twin.uniform(0, min(25, 10 * 2**n)) for n in range(3))
        start = anyio.current_time()
        report = await runner(ScriptedAgent(decide), FakeEnvironment(), policy=policy).run("b")
        assert anyio.current_time() - start == pytest.approx(expected)
        [trial] = report.tasks["t"].trials
        assert (trial.status, trial.attempts) == (TrialStatus.COMPLETED, 4)

    async def test_trial_timeout_bounds_each_attempt_not_the_whole_trial(self) -> None:
        async def decide(s: AgentSession) -> Final:
            await anyio.sleep(40)
            if s.attempt == 0:
                raise ConnectionError("slow and then broken")
            return Final("ok")

        policy = RetryPolicy(max_retries=1, backoff_base=0)
        report = await runner(
            ScriptedAgent(decide), FakeEnvironment(), policy=policy, trial_timeout=60
        ).run("b")
        [trial] = report.tasks["t"].trials
        assert (trial.status, trial.attempts) == (TrialStatus.COMPLETED, 2)


async def _one_trial_with_one_retry(decide: Any, environment: Any) -> corral.BenchmarkReport:
    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(decide)},
        {"e": environment},
        store=MemoryStore(),
        retry_policy=RetryPolicy(max_retries=1, backoff_base=0),
    )
    return await runner.run("b")


@pytest.mark.anyio
async def test_usage_of_a_failed_attempt_is_counted() -> None:
    def decide(session: corral.AgentSession) -> Final:
        session.record_usage(input_tokens=10, cost=0.5)
        if session.attempt == 0:
            raise RuntimeError("the model call cost money, then the agent failed")
        return Final(1)

    report = await _one_trial_with_one_retry(decide, FakeEnvironment())
    assert report.usage.input_tokens == 20
    assert report.usage.cost == pytest.approx(1.0)


@pytest.mark.anyio
@pytest.mark.parametrize("tools", [["fail"], ["ok", "fail"]])
async def test_usage_of_a_failed_tool_call_is_counted(tools: list[str]) -> None:
    """A tool that records usage and then raises: counted once the retry finishes the
    turn, whether the turn had one action (run on the session) or several (views)."""

    class PaidTools:
        async def setup(self, session: corral.AgentSession) -> int:
            return 0

        async def execute(self, action: Action, session: corral.AgentSession) -> corral.ToolEffect:
            session.record_usage(input_tokens=5)
            if action.tool == "fail" and session.attempt == 0:
                raise RuntimeError("the tool call cost money, then failed")
            return corral.ToolEffect(observation=1)

        async def evaluate(self, trial: corral.TrialRecord) -> corral.Evaluation:
            return corral.Evaluation(1.0, True)

    def decide(session: corral.AgentSession) -> list[Action] | Final:
        if session.iteration == 0:
            return [Action(tool, {}) for tool in tools]
        return Final(1)

    report = await _one_trial_with_one_retry(decide, PaidTools())
    trial = report.tasks["t"].trials[0]
    assert (trial.status, trial.attempts) == (corral.TrialStatus.COMPLETED, 2)
    # Every call that ran: each tool once, and the failing one a second time.
    assert report.usage.input_tokens == 5 * (len(tools) + 1)
