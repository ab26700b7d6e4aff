"""The built-in demo: shape, determinism, the chain's inputs, parallel tool calls, and
the command line's model options (a "real" endpoint, a missing extra)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import corral
from corral.cli import main
from corral.demo import build_demo, demo_retry_policy, demo_server
from corral.demo._script import parse_answer
from corral.testing import ChatReply, FakeChatServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    # The demo is about the scripted model, not the event loop (both run the client's tests).
    return "asyncio"


NO_SERVER = "http://127.0.0.1:9/v1"


async def _run(benchmark_id: str, store: corral.CommitStore) -> corral.BenchmarkReport:
    with demo_server(0.0) as url:  # a fresh server per run: it remembers what it saw
        benchmark = build_demo(url, latency=0.0, api_key="")
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
    benchmark = build_demo(NO_SERVER, latency=0.0)
    tasks = benchmark.tasks
    assert len(tasks) >= 20
    assert len({m.model for m in tasks.values()}) == 2
    assert {m.environment_id for m in tasks.values()} == set(benchmark.environments)
    assert len(benchmark.environments) == 2
    assert all(env.tools for env in benchmark.environments.values())  # type: ignore[attr-defined]
    assert tasks["bid-build"].dependencies == ("bid-plan",)
    assert tasks["bid-verify"].dependencies == ("bid-build",)
    defaults = benchmark.run_defaults
    assert defaults["trials_per_task"] == 4
    assert tuple(defaults["k_values"]) == (1, 2, 4)
    assert defaults["max_parallel_by_model"] and defaults["max_parallel_by_environment"]


@pytest.mark.slow
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
    assert first.counts["error"] > 0 and first.counts["max_iterations"] > 0
    assert first.limited.get("token_limit", 0) > 0  # the widest search has a token budget
    errors = [t.error or "" for task in first.tasks.values() for t in task.trials]
    assert any(e.startswith("ModelError: HTTP 400") and "content filter" in e for e in errors)
    # Transient 500s were retried as attempts; 429s were waited out, not counted.
    assert any(t.attempts > 1 for task in first.tasks.values() for t in task.trials)
    assert first.usage.input_tokens > 0 and first.usage.cost > 0

    # The chain: the child's first addition starts from the parent's first line total.
    plan = first.tasks["bid-plan"].trials
    build = first.tasks["bid-build"].trials
    checked = 0
    for r, parent in enumerate(plan):
        if str(parent.status) != "completed" or str(build[r].status) == "unreachable":
            continue
        history = await store.history(corral.TrialKey("demo-a", "bid-build", r))
        first_action = next(c for c in history if c.kind == "action")
        assert first_action.payload["arguments"]["a"] == parent.output["lines"][0]
        checked += 1
    assert checked
    history = await store.history(corral.TrialKey("demo-a", "arith-1-large", 0))
    assert any(c.kind == "action" and c.payload["index"] > 0 for c in history)


def test_parse_answer() -> None:
    assert parse_answer(' {"subtotal": 12} ') == {"subtotal": 12}
    assert parse_answer('```json\n{"lines": [1, 2]}\n```') == {"lines": [1, 2]}
    assert parse_answer("The number is 42.") == 42
    assert parse_answer('Done: {"a": 1} as asked') == {"a": 1}
    assert parse_answer("no idea") == "no idea"


def test_demo_against_another_endpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # A fake server stands in for a real endpoint: one model, the same tasks.
    with FakeChatServer(lambda body: ChatReply.text("The answer is 42.")) as server:
        args = ["demo", "--fast", "--no-progress", "--store", str(tmp_path / "s.db")]
        model = ["--model", "org/Some-Model:7b"]
        result = CliRunner().invoke(main, [*args, "--base-url", server.url, *model])
        assert result.exit_code == 0, result.output
        # A first call checks the endpoint, then the trials' calls.
        assert server.calls == 1 + 12 * 4 and server.requests[0]["model"] == "org/Some-Model:7b"
        assert "tools" not in server.requests[0] and server.requests[1]["tools"]
        assert "authorization" not in server.headers[0]
    assert server.url in result.output and "sim-" not in result.output
    assert "mean of 12 tasks" in result.output and "guess-50-Some-Model-7b" in result.output


def test_demo_flags_and_missing_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    result = CliRunner().invoke(main, ["demo", "--model", "gpt-x"])
    assert result.exit_code == 2 and "--base-url and --model together" in result.output
    result = CliRunner().invoke(main, ["demo", "--base-url", "ftp://x", "--model", "m"])
    assert result.exit_code == 2 and "ftp://x" in result.output
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "httpx" else real(name, *a)
    )
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines == [
        "error: corral demo needs httpx: install the models extra, pip install "
        "'corral[models]' (in a checkout: pip install -e '.[models]')"
    ]


def _demo_on(url: str, tmp_path: Path) -> Any:
    args = ["demo", "--fast", "--no-progress", "--store", str(tmp_path / "s.db")]
    return CliRunner().invoke(main, [*args, "--base-url", url, "--model", "m"])


def test_demo_sends_the_key_to_a_real_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-demo-123")
    with FakeChatServer(lambda body: ChatReply.text("The answer is 42.")) as server:
        result = _demo_on(server.url, tmp_path)
        assert result.exit_code == 0, result.output
    assert server.calls > 12
    assert {h.get("authorization") for h in server.headers} == {"Bearer sk-demo-123"}
    local = build_demo("http://127.0.0.1:9/v1", 0.0, api_key="")  # as the local demo's
    assert all(not agent.model.api_key for agent in local.agents.values())


async def test_the_demo_models_reason_so_its_transcripts_show_reasoning() -> None:
    from corral.history import ModelCallPayload, decode

    store = corral.MemoryStore()
    with demo_server(0.0) as url:
        benchmark = build_demo(url, latency=0.0, api_key="")
        runner = corral.CorralRunner(
            benchmark.tasks, benchmark.agents, benchmark.environments, store=store
        )
        defaults = {**benchmark.run_defaults, "trials_per_task": 1, "k_values": (1,)}
        await runner.run("demo-r", task_ids=["arith-3-large"], **defaults)
    history = await store.history(corral.TrialKey("demo-r", "arith-3-large", 0))
    calls = [decode(c) for c in history if c.kind == "model_call"]
    assert calls and all(isinstance(c, ModelCallPayload) and c.reasoning for c in calls)
    assert "tool call" in str(calls[0].reasoning)  # type: ignore[union-attr]
