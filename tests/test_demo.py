"""The built-in demo: shape, determinism, the chain's inputs, parallel tool calls."""

from __future__ import annotations

from typing import Any

import pytest

import corral
from corral.demo import build_demo, demo_retry_policy

pytestmark = pytest.mark.anyio


async def _run(benchmark_id: str, store: corral.CommitStore) -> corral.BenchmarkReport:
    benchmark = build_demo(latency=0.0)
    runner = corral.CorralRunner(
        benchmark.tasks,
        benchmark.agents,
        benchmark.environments,
        store=store,
        retry_policy=demo_retry_policy(0.0),
    )
    return await runner.run(benchmark_id, **benchmark.run_defaults)


def _outcomes(report: corral.BenchmarkReport) -> dict[str, Any]:
    return {
        task_id: [(str(t.status), t.output, t.passed, t.attempts) for t in task.trials]
        for task_id, task in report.tasks.items()
    }


def test_demo_shape() -> None:
    benchmark = build_demo(latency=0.0)
    tasks = benchmark.tasks
    assert len(tasks) >= 20
    assert len({m.model for m in tasks.values()}) == 2
    assert {m.environment_id for m in tasks.values()} == set(benchmark.environments)
    assert len(benchmark.environments) == 2
    assert tasks["bid-build"].dependencies == ("bid-plan",)
    assert tasks["bid-verify"].dependencies == ("bid-build",)
    defaults = benchmark.run_defaults
    assert defaults["trials_per_task"] == 4
    assert tuple(defaults["k_values"]) == (1, 2, 4)
    assert defaults["max_parallel_by_model"] and defaults["max_parallel_by_environment"]


async def test_demo_is_deterministic_across_benchmark_ids() -> None:
    store = corral.MemoryStore()
    first = await _run("demo-a", store)
    second = await _run("demo-b", store)
    assert _outcomes(first) == _outcomes(second)
    assert first.pass_at_k == second.pass_at_k
    assert set(first.pass_at_k) == {1, 2, 4}
    assert sum(first.counts.values()) == len(first.tasks) * 4
    # A small but real benchmark: some trials pass, some fail, some error.
    assert 0 < first.pass_at_k[1] < 1
    assert first.counts["error"] > 0
    assert first.usage.input_tokens > 0 and first.usage.cost > 0


async def test_demo_chain_reads_parent_output_and_calls_tools_in_parallel() -> None:
    store = corral.MemoryStore()
    report = await _run("demo", store)
    plan = report.tasks["bid-plan"].trials
    build = report.tasks["bid-build"].trials
    checked = 0
    for r, parent in enumerate(plan):
        if str(parent.status) != "completed" or str(build[r].status) == "unreachable":
            continue
        history = await store.history(corral.TrialKey("demo", "bid-build", r))
        first_action = next(c for c in history if c.kind == "action")
        # The child's first addition starts from the parent's first line total.
        assert first_action.payload["arguments"]["a"] == parent.output["lines"][0]
        checked += 1
    assert checked
    history = await store.history(corral.TrialKey("demo", "arith-1-large", 0))
    assert any(c.kind == "action" and c.payload["index"] > 0 for c in history)
