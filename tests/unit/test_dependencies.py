"""Dependencies: same-round outputs, unreachable descendants, resume, limits over random DAGs."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import corral
from corral import (
    BenchmarkTaskMetadata,
    ConfigError,
    CorralRunner,
    Final,
    MemoryStore,
    TrialStatus,
)
from corral import BenchmarkTaskMetadata as Meta
from corral.testing import ConcurrencyGauge, FakeEnvironment, Gate, ScriptedAgent


def make_runner(
    tasks: dict[str, Meta], agent: Any, env: Any = None, **kw: Any
) -> corral.CorralRunner:
    return corral.CorralRunner(
        tasks, {"a": agent}, {"e": env or FakeEnvironment()}, store=corral.MemoryStore(), **kw
    )


@pytest.mark.anyio
@pytest.mark.parametrize("per_task", [1, 3])
async def test_same_round_outputs_reach_children(per_task: int) -> None:
    seen: dict[tuple[str, int], Any] = {}

    def decide(session: corral.AgentSession) -> Final:
        seen[(session.task_id, session.trial)] = dict(session.inputs)
        return Final(f"{session.task_id}{session.trial}")

    tasks = {
        "p": Meta("a", "e", inputs={"x": 1}),
        "q": Meta("a", "e"),
        "c": Meta("a", "e", dependencies=("p", "q"), inputs={"y": 2}),
    }
    report = await make_runner(tasks, ScriptedAgent(decide)).run(
        "b", trials_per_task=3, max_parallel=8, max_parallel_per_task=per_task
    )
    assert report.counts["completed"] == 9
    for r in range(3):
        assert seen[("c", r)] == {"y": 2, "p": f"p{r}", "q": f"q{r}"}
        assert seen[("p", r)] == {"x": 1}


@pytest.mark.anyio
async def test_failing_root_makes_the_chain_unreachable_and_resume_keeps_it() -> None:
    def decide(session: corral.AgentSession) -> Final:
        if session.task_id == "root" and session.trial != 1:
            raise RuntimeError("root broke")
        return Final("ok")

    tasks = {
        "root": Meta("a", "e"),
        "mid": Meta("a", "e", dependencies=("root",)),
        "leaf": Meta("a", "e", dependencies=("mid",)),
        "free": Meta("a", "e"),
    }
    agent = ScriptedAgent(decide)
    store = corral.MemoryStore()
    runner = corral.CorralRunner(
        tasks, {"a": agent}, {"e": FakeEnvironment()}, store=store, max_retries=0
    )
    report = await runner.run("b", trials_per_task=3, k_values=(1, 3))
    leaf = report.tasks["leaf"].trials
    assert [t.status for t in leaf] == [
        TrialStatus.UNREACHABLE,
        TrialStatus.COMPLETED,
        TrialStatus.UNREACHABLE,
    ]
    assert [t.status for t in report.tasks["mid"].trials][0] == TrialStatus.UNREACHABLE
    assert leaf[0].evaluation is None and "mid" in (leaf[0].error or "")
    assert report.tasks["mid"].trials[0].error and "'root'" in report.tasks["mid"].trials[0].error
    assert report.counts["unreachable"] == 4 and report.counts["error"] == 2
    # Unreachable trials count as not passed: 1 of 3 passed for root, mid and leaf.
    assert report.tasks["leaf"].pass_at_k[1] == pytest.approx(1 / 3)
    assert report.tasks["leaf"].pass_at_k[3] == 1.0
    history = await store.history(corral.TrialKey("b", "leaf", 0))
    assert [c.kind for c in history] == ["terminal"]
    assert history[0].payload["cause"] == {"task_id": "mid", "status": "unreachable"}

    calls = agent.calls
    again = await runner.run("b", trials_per_task=3, k_values=(1, 3))
    assert agent.calls == calls  # nothing re-run, unreachable stays unreachable
    assert again.counts == report.counts and again.resumed == 12


@pytest.mark.anyio
async def test_children_start_when_parents_finish_executing_not_when_evaluated() -> None:
    child_started = Gate()

    def decide(session: corral.AgentSession) -> Final:
        if session.task_id == "child":
            child_started.open()
        return Final(1)

    # The parent's evaluation waits for the child to start: it must not gate it.
    env = FakeEnvironment(
        evaluate_gate=lambda trial: child_started if trial.task_id == "parent" else None
    )
    tasks = {"parent": Meta("a", "e"), "child": Meta("a", "e", dependencies=("parent",))}
    with anyio.fail_after(5):
        report = await make_runner(tasks, ScriptedAgent(decide), env).run("b")
    assert report.counts["completed"] == 2


@pytest.mark.anyio
async def test_selection_is_closed_and_marked() -> None:
    tasks = {
        "a0": Meta("a", "e"),
        "a1": Meta("a", "e", dependencies=("a0",)),
        "other": Meta("a", "e"),
    }
    report = await make_runner(tasks, ScriptedAgent()).run("b", task_ids=["a1"])
    assert list(report.tasks) == ["a0", "a1"]
    assert report.added_by_dependencies == ["a0"]
    assert report.tasks["a0"].added_by_dependencies
    with pytest.raises(corral.ConfigError, match="'a1' depends on 'a0'"):
        await make_runner(tasks, ScriptedAgent()).run(
            "b", task_ids=["a1"], include_dependencies=False
        )


@st.composite
def dags(draw: st.DrawFn) -> tuple[dict[str, Meta], dict[str, Any]]:
    n = draw(st.integers(1, 7))
    tasks = {}
    for i in range(n):
        parents = draw(st.sets(st.integers(0, i - 1), max_size=2)) if i else set()
        tasks[f"t{i}"] = Meta(
            "a",
            draw(st.sampled_from(["e1", "e2"])),
            model=draw(st.sampled_from(["m1", "m2", None])),
            dependencies=tuple(f"t{p}" for p in sorted(parents)),
        )
    limits = {
        "max_parallel": draw(st.integers(1, 4)),
        "max_parallel_per_task": draw(st.integers(1, 3)),
        "max_parallel_by_model": draw(
            st.dictionaries(st.sampled_from(["m1", "m2"]), st.integers(1, 2), max_size=2)
        ),
        "max_parallel_by_environment": draw(
            st.dictionaries(st.sampled_from(["e1", "e2"]), st.integers(1, 2), max_size=2)
        ),
        "trials_per_task": draw(st.integers(1, 3)),
    }
    # A limit must name a model or environment the tasks have (a typo is refused).
    for name, field in (
        ("max_parallel_by_model", "model"),
        ("max_parallel_by_environment", "environment_id"),
    ):
        used = {getattr(meta, field) for meta in tasks.values()}
        limits[name] = {k: v for k, v in limits[name].items() if k in used}
    return tasks, limits


@pytest.mark.anyio
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=dags(), fail=st.sets(st.integers(0, 6), max_size=2))
async def test_random_dags_respect_limits_and_order(
    anyio_backend: str, case: tuple[dict[str, Meta], dict[str, Any]], fail: set[int]
) -> None:
    tasks, limits = case
    ended: set[tuple[str, int]] = set()
    violations: list[str] = []
    limit_of = {("model", m): n for m, n in limits["max_parallel_by_model"].items()}
    limit_of.update({("env", e): n for e, n in limits["max_parallel_by_environment"].items()})
    limit_of["all"] = limits["max_parallel"]
    gauge = ConcurrencyGauge(limit_of)

    async def decide(session: corral.AgentSession) -> Final:
        for parent in session.metadata.dependencies:
            if (parent, session.trial) not in ended:
                violations.append(f"{session.task_id}/{session.trial} before {parent}")
        with gauge.hold("all", ("model", session.model), ("env", session.metadata.environment_id)):
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
        if int(session.task_id[1:]) in fail and session.trial == 0:
            raise RuntimeError("planned failure")
        return Final(session.task_id)

    class Ended:
        def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
            if commit.kind == "terminal":
                ended.add((key.task_id, key.trial))

    trials = limits.pop("trials_per_task")
    runner = corral.CorralRunner(
        tasks,
        {"a": ScriptedAgent(decide)},
        {"e1": FakeEnvironment(), "e2": FakeEnvironment()},
        store=corral.MemoryStore(),
        max_retries=0,
    )
    report = await runner.run("b", trials_per_task=trials, observers=[Ended()], **limits)
    gauge.assert_ok()
    assert violations == []
    assert sum(report.counts.values()) == len(tasks) * trials
    for task_id, meta in tasks.items():
        for trial in report.tasks[task_id].trials:
            parent_ok = all(
                report.tasks[p].trials[trial.trial].status == TrialStatus.COMPLETED
                for p in meta.dependencies
            )
            if not parent_ok:
                assert trial.status == TrialStatus.UNREACHABLE


def test_a_string_for_dependencies_is_refused() -> None:
    with pytest.raises(ConfigError, match="pq"):
        tasks = {
            "p": BenchmarkTaskMetadata("a", "e"),
            "q": BenchmarkTaskMetadata("a", "e"),
            "pq": BenchmarkTaskMetadata("a", "e"),
            "child": BenchmarkTaskMetadata("a", "e", dependencies="pq"),  # type: ignore[arg-type]
        }
        runner = CorralRunner(
            tasks, {"a": ScriptedAgent()}, {"e": FakeEnvironment()}, store=MemoryStore()
        )
        runner.prepare()
