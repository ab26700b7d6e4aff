"""Retries leave a trace: each failed attempt's error is recorded with the trial's terminal
(``failed_attempts``), `corral show` prints every one, and the report counts retries."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import anyio
import pytest
from rich.console import Console

from corral import (
    AgentSession,
    BenchmarkReport,
    BenchmarkTaskMetadata,
    ConfigError,
    CorralRunner,
    Final,
    MemoryStore,
    RetryPolicy,
    RunConfig,
    SQLiteStore,
    TrialKey,
)
from corral.cli._history import load_history, render_history
from corral.cli._inspect import rebuild_report
from corral.report import build_report
from corral.testing import FakeEnvironment, ScriptedAgent

from ..support import retry_child
from ..support.stepped_child import run_child_until

pytestmark = pytest.mark.anyio


def flaky(session: AgentSession) -> Final:
    """Task "flaky" fails its first two attempts, each its own way; "ok" never fails."""
    if session.task_id == "flaky" and session.attempt < 2:
        kind = ConnectionError if session.attempt == 0 else TimeoutError
        raise kind(f"attempt {session.attempt} went wrong")
    return Final(1)


def make_runner(store: MemoryStore) -> CorralRunner:
    tasks = {t: BenchmarkTaskMetadata("a", "e") for t in ("flaky", "ok")}
    policy = RetryPolicy(max_retries=2, backoff_base=0)
    return CorralRunner(
        tasks,
        {"a": ScriptedAgent(flaky)},
        {"e": FakeEnvironment()},
        store=store,
        retry_policy=policy,
    )


async def test_each_failed_attempt_is_recorded_and_shown() -> None:
    store = MemoryStore()
    report = await make_runner(store).run("b", trials_per_task=2)
    async with store.opened():
        commits = await store.history(TrialKey("b", "flaky", 0))
        history = await load_history(store, "b", "flaky", 0)
    [terminal] = [c.payload for c in commits if c.kind == "terminal"]
    failed = terminal["failed_attempts"]
    assert [(p["attempt"], p["error"], p["error_type"]) for p in failed] == [
        (1, "ConnectionError: attempt 0 went wrong", "ConnectionError"),
        (2, "TimeoutError: attempt 1 went wrong", "TimeoutError"),
    ]
    assert "went wrong" in failed[0]["traceback"]
    [trial, _] = report.tasks["flaky"].trials
    assert (trial.status, trial.attempts) == ("completed", 3)
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render_history(history))
    text = " ".join(console.export_text().split())
    assert "ConnectionError: attempt 0 went wrong (seq" in text
    assert "TimeoutError: attempt 1 went wrong (seq" in text
    assert "attempt 1 failed ConnectionError" in text and "attempt 2 failed TimeoutError" in text
    assert "attempts 3 · 2 failed and retried (errors below)" in text
    # Nothing between the attempts: later actions keep their step keys (seqs).
    assert [c.kind for c in commits] == ["setup", "terminal", "evaluation"]


async def test_the_report_counts_retried_attempts_by_status() -> None:
    report = await make_runner(MemoryStore()).run("b", trials_per_task=2)
    assert report.retries == {"completed": 4}
    data: dict[str, Any] = report.to_dict(tasks=False)
    assert data["retries"] == {"completed": 4}


async def test_a_failed_first_attempt_leaves_the_run_and_the_rebuilt_report_equal() -> None:
    """The first attempt fails before its setup commit."""
    store = MemoryStore()
    setups = []

    def state(session: AgentSession) -> int:
        setups.append(session.attempt)
        if session.attempt == 0:
            raise ConnectionError("sandbox not ready")
        return 0

    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent()},
        {"e": FakeEnvironment(state=state)},
        store=store,
        retry_policy=RetryPolicy(max_retries=1, backoff_base=0),
    )
    report = await runner.run("b")
    async with store.opened():
        rebuilt = build_report(
            "b", await store.benchmark_config("b") or {}, await store.summaries("b"), k_values=(1,)
        )
    assert setups == [0, 1]
    [ran] = report.tasks["t"].trials
    [again] = rebuilt.tasks["t"].trials
    assert (ran.commits, ran.started_at) == (again.commits, again.started_at)
    assert ran.commits == 3  # setup, terminal, evaluation


@pytest.mark.slow  # starts a process: a system test
def test_a_failed_attempt_survives_a_kill_9_of_its_retry(tmp_path: Path) -> None:
    """Attempt 1 fails after its setup; the retry's action is durable, then kill -9.
    The resumed trial still records (and shows, and counts) the failed attempt."""
    store = tmp_path / "store.db"
    acked = run_child_until(
        "tests.support.retry_child", [str(store)], lambda acked: acked[-1]["kind"] == "action"
    )
    assert [a["kind"] for a in acked] == ["setup", "action"]

    async def resume() -> tuple[BenchmarkReport, BenchmarkReport, str]:
        report = await retry_child.runner(store, fail_first=False).run("retry")
        sqlite = SQLiteStore(store)
        async with sqlite.opened():
            rebuilt = await rebuild_report(sqlite, "retry")
            history = await load_history(sqlite, "retry", "t", 0)
        console = Console(width=200, record=True, file=io.StringIO())
        console.print(render_history(history))
        return report, rebuilt, " ".join(console.export_text().split())

    report, rebuilt, shown = anyio.run(resume)
    assert report.retries == rebuilt.retries == {"completed": 1}
    [trial] = rebuilt.tasks["t"].trials
    assert (trial.status, trial.attempts) == ("completed", 2)
    assert shown.count("attempt 1 failed ConnectionError") == 1  # on setup and terminal
    assert "ConnectionError: the first attempt went wrong" in shown
    assert "attempts 2 · 1 failed and retried (errors below)" in shown


async def test_a_policy_given_no_retry_as_a_list_ends_the_trial_at_once() -> None:
    """`RetryPolicy(no_retry=[KeyError])` kept the list, and `isinstance` takes none: the
    run crashed with a TypeError at the agent's first exception."""

    class Broken:
        async def act(self, session: AgentSession) -> Final:
            raise KeyError("broken")

    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": Broken()},
        {"e": FakeEnvironment()},
        store=MemoryStore(),
        retry_policy=RetryPolicy(no_retry=[KeyError], backoff_base=0),  # type: ignore[arg-type]
    )
    trial = (await runner.run("b")).tasks["t"].trials[0]
    assert (trial.status, trial.attempts) == ("error", 1)


def test_a_run_takes_no_retry_in_every_shape_the_runner_takes() -> None:
    """``CorralRunner(no_retry={KeyError})`` and ``RetryPolicy`` take any collection of
    exception types; a run's ``no_retry`` (`RunConfig.of`, ``run(no_retry=...)``) took
    only a sequence, a set refused, and named a shape of its own in its refusal."""
    for given in ({KeyError}, frozenset({KeyError}), [KeyError], (k for k in [KeyError])):
        retry = RunConfig.of(no_retry=given).retry
        assert retry is not None and retry.no_retry == (KeyError,)
    for bad in (KeyError, "KeyError", 3):
        with pytest.raises(ConfigError, match="no_retry must be a list of exception types"):
            RunConfig.of(no_retry=bad)
