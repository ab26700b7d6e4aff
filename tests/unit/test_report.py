"""pass@k and the report a run returns."""

from __future__ import annotations

import json
from fractions import Fraction
from math import comb

import pytest

from corral import (
    AgentSession,
    BenchmarkTaskMetadata,
    CorralRunner,
    Evaluation,
    Final,
    MemoryStore,
    RetryPolicy,
    TrialRecord,
    TrialStatus,
    pass_at_k,
)
from corral.testing import FakeEnvironment, ScriptedAgent


def chen(n: int, c: int, k: int) -> Fraction:
    """1 - C(n-c, k) / C(n, k), exactly (C(m, k) is 0 for m < k)."""
    return 1 - Fraction(comb(n - c, k), comb(n, k))


@pytest.mark.parametrize("n", range(1, 11))
def test_pass_at_k_is_the_unbiased_estimator_for_every_c_and_k(n: int) -> None:
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(chen(n, c, k)), rel=1e-12, abs=0)


@pytest.mark.parametrize("n", [1, 2, 5, 20])
def test_pass_at_k_edges(n: int) -> None:
    for k in range(1, n + 1):
        assert pass_at_k(n, 0, k) == 0.0
        assert pass_at_k(n, n, k) == 1.0
    for c in range(n + 1):
        assert pass_at_k(n, c, 1) == pytest.approx(c / n)
        values = [pass_at_k(n, c, k) for k in range(1, n + 1)]
        assert values == sorted(values)  # more tries never hurt


def test_pass_at_k_for_large_n_stays_exact_enough() -> None:
    assert pass_at_k(200, 1, 100) == pytest.approx(0.5)
    assert pass_at_k(1000, 3, 10) == pytest.approx(float(chen(1000, 3, 10)))


@pytest.mark.parametrize(("n", "c", "k"), [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4)])
def test_pass_at_k_refuses_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


def passes_first(r: TrialRecord) -> Evaluation:
    """Task "c<m>" passes its first m trials."""
    m = int(r.task_id[1:])
    return Evaluation(float(r.trial < m), r.trial < m)


@pytest.mark.anyio
@pytest.mark.parametrize("n", [1, 3, 5])
async def test_a_report_gives_pass_at_k_per_task_and_its_mean(n: int) -> None:
    tasks = {f"c{m}": BenchmarkTaskMetadata("a", "e") for m in range(n + 1)}
    runner = CorralRunner(
        tasks,
        {"a": ScriptedAgent()},
        {"e": FakeEnvironment(evaluate=passes_first)},
        store=MemoryStore(),
    )
    ks = list(range(1, n + 1))
    report = await runner.run(
        "b", trials_per_task=n, k_values=ks, max_parallel=8, max_parallel_per_task=n
    )
    for m in range(n + 1):
        task = report.tasks[f"c{m}"]
        assert [t.trial for t in task.trials] == list(range(n))
        assert task.passed == m
        assert task.pass_at_k == pytest.approx({k: float(chen(n, m, k)) for k in ks})
    assert report.pass_at_k == pytest.approx(
        {k: float(sum(chen(n, m, k) for m in range(n + 1)) / (n + 1)) for k in ks}
    )
    assert report.counts["completed"] == n * (n + 1)
    data = json.loads(json.dumps(report.to_dict()))
    assert data["tasks"]["c0"]["pass_at_k"] == {str(k): 0.0 for k in ks}
    assert data["benchmark_id"] == "b" and data["k_values"] == ks


@pytest.mark.anyio
async def test_only_a_passing_evaluation_counts() -> None:
    def decide(s: AgentSession) -> Final:
        if s.trial == 1:
            raise RuntimeError("no answer")  # error: not evaluated, not passed
        return Final(s.trial)

    def evaluate(r: TrialRecord) -> Evaluation:
        if r.trial == 3:
            raise ValueError("grader down")  # no evaluation: not passed
        return Evaluation(1.0, r.trial != 2)

    tasks = {"t": BenchmarkTaskMetadata("a", "e")}
    runner = CorralRunner(
        tasks,
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment(evaluate=evaluate)},
        store=MemoryStore(),
        retry_policy=RetryPolicy(max_retries=0),
    )
    report = await runner.run("b", trials_per_task=4, k_values=(1, 2, 4), max_parallel_per_task=4)
    task = report.tasks["t"]
    assert [t.passed for t in task.trials] == [True, False, False, False]
    assert [t.status for t in task.trials] == [
        TrialStatus.COMPLETED,
        TrialStatus.ERROR,
        TrialStatus.COMPLETED,
        TrialStatus.COMPLETED,
    ]
    assert task.pass_at_k == pytest.approx({1: 0.25, 2: 0.5, 4: 1.0})
    assert report.counts["completed"] == 3 and report.counts["error"] == 1


@pytest.mark.anyio
async def test_tasks_added_by_dependencies_count_in_the_mean_and_are_marked() -> None:
    tasks = {
        "parent": BenchmarkTaskMetadata("a", "e"),
        "child": BenchmarkTaskMetadata("a", "e", dependencies=("parent",)),
    }
    env = FakeEnvironment(evaluate=lambda r: Evaluation(1.0, r.task_id == "parent"))
    runner = CorralRunner(tasks, {"a": ScriptedAgent()}, {"e": env}, store=MemoryStore())
    report = await runner.run("b", task_ids=["child"])
    assert set(report.tasks) == {"parent", "child"}
    assert report.added_by_dependencies == ["parent"]
    assert report.tasks["parent"].added_by_dependencies
    assert report.pass_at_k == {1: 0.5}
    assert report.to_dict()["added_by_dependencies"] == ["parent"]
