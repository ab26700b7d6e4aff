"""The run summary says what happened: timeouts, max_iterations and over-budget trials are
listed like errors, the exit code follows each status, and a stopped run says why."""

from __future__ import annotations

import io
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result
from rich.console import Console
from trio.testing import MockClock

from corral import (
    Action,
    AgentSession,
    BenchmarkReport,
    BenchmarkTaskMetadata,
    CorralRunner,
    Final,
    MemoryStore,
    RetryPolicy,
)
from corral.cli import main
from corral.cli._execute import EXIT_FAILED, EXIT_OK, exit_code, print_report
from corral.cli._tables import report_summary
from corral.report import ErrorGroup
from corral.testing import FakeEnvironment, ScriptedAgent


def in_virtual_time(job: Callable[[], Awaitable[Any]]) -> Any:
    """Run ``job`` on trio with a clock that jumps over every wait: timeouts are instant."""
    return anyio.run(
        job, backend="trio", backend_options={"clock": MockClock(autojump_threshold=0)}
    )


def cli(*args: Any) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def flat(text: str) -> str:
    return " ".join(text.split())


def rendered(report: BenchmarkReport) -> str:
    """The summary `corral run` prints for ``report``, as plain text."""
    console = Console(width=200, record=True, file=io.StringIO())
    print_report(console, report, None, as_json=False)
    return flat(console.export_text())


async def decide(session: AgentSession) -> Action | Final:
    if session.task_id == "hang" and session.trial == 0:
        await anyio.sleep_forever()
    if session.task_id == "loop":
        return Action("step", {})
    return Final(session.trial)


def run_with_endings(tasks: tuple[str, ...] = ("ok", "hang", "loop")) -> Any:
    """A run in virtual time on a memory store (a file store's writer thread would let
    the clock jump past every timeout while a commit is on its way)."""
    meta = {t: BenchmarkTaskMetadata("a", "e", max_iterations=2) for t in tasks}
    runner = CorralRunner(
        meta,
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=MemoryStore(),
        trial_timeout=5.0,
        retry_policy=RetryPolicy(max_retries=0),
    )
    return in_virtual_time(lambda: runner.run("b", trials_per_task=2))


def test_timeouts_and_max_iterations_are_listed_like_errors() -> None:
    report: BenchmarkReport = run_with_endings()
    assert report.errors == ()
    assert report.endings == {
        "timeout": (
            ErrorGroup("TimeoutError: attempt exceeded trial_timeout of 5.0 s", 1, ("hang#0",)),
        ),
        "max_iterations": (
            ErrorGroup(
                "no Final answer within the task's max_iterations turns", 2, ("loop#0", "loop#1")
            ),
        ),
    }
    assert report.to_dict()["endings"]["timeout"][0]["examples"] == ["hang#0"]
    text = rendered(report)
    assert "timeout: 1" in text and "hang#0" in text
    assert "max_iterations: 2" in text and "loop#0, loop#1" in text
    assert "corral show b hang 0" in text


def test_a_timeout_is_not_a_clean_run_but_max_iterations_is() -> None:
    assert exit_code(run_with_endings()) == EXIT_FAILED
    assert exit_code(run_with_endings(("ok", "loop"))) == EXIT_OK


@pytest.mark.parametrize("command", ["run", "rescore"])
def test_help_lists_the_exit_code_of_each_status(command: str) -> None:
    text = flat(cli(command, "--help").output)
    for status in ("timeout", "error", "max_iterations", "limit", "130"):
        assert status in text, status


async def costly_or_broken(session: AgentSession) -> Final:
    session.record_usage(input_tokens=1, cost=1.0)
    if session.task_id == "bad":
        raise RuntimeError("boom")
    return Final(1)


def stopped_run(store: Path | None = None, **kwargs: Any) -> BenchmarkReport:
    tasks = {t: BenchmarkTaskMetadata("a", "e") for t in ("bad", "ok")}
    runner = CorralRunner(
        tasks,
        {"a": ScriptedAgent(costly_or_broken)},
        {"e": FakeEnvironment()},
        store=MemoryStore() if store is None else store,
        retry_policy=RetryPolicy(max_retries=0),
    )
    run = anyio.run if store is not None else in_virtual_time
    report: BenchmarkReport = run(
        lambda: runner.run("b", trials_per_task=4, max_parallel=1, order="fifo", **kwargs)
    )
    assert not report.complete and report.stopped is not None
    return report


def summary_lines(report: BenchmarkReport) -> list[str]:
    """The lines under the tables: the summary grid's rows, first to last."""
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(report_summary(report, None))
    return [" ".join(line.split()) for line in console.export_text().splitlines()]


def test_a_run_stopped_by_fail_on_error_says_why_and_what_to_change() -> None:
    lines = summary_lines(stopped_run(fail_on_error=1))
    assert lines[0].startswith("stopped fail_on_error: 2 errors exceeded the limit of 1")
    advice = " ".join(lines[:3])
    assert "--fail-on-error" in advice and "--benchmark-id b" in advice


def test_a_run_stopped_by_run_cost_limit_says_why_and_what_to_change() -> None:
    lines = summary_lines(stopped_run(run_cost_limit=2.0))
    assert lines[0].startswith("stopped run_cost_limit: 2 spent of 2")
    advice = " ".join(lines[:3])
    assert "a higher --run-cost-limit" in advice and "--benchmark-id b" in advice


def test_report_says_why_the_last_run_stopped(tmp_path: Path) -> None:
    stopped_run(tmp_path / "s.db", fail_on_error=1)
    text = flat(cli("report", "b", "--store", tmp_path / "s.db").output)
    assert "stopped fail_on_error: 2 errors exceeded the limit of 1" in text
