"""Running a benchmark from the command line: progress while it runs, the report after."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import click
from rich.console import Console

from .._runner import CorralRunner, RunInfo, report_path
from .._types import Commit
from ..progress import ProgressDisplay
from ..report import BenchmarkReport
from ..store import TrialKey
from ._tables import report_renderables

#: Captured or piped output is not a terminal: wide enough that tables do not fold.
PIPE_WIDTH = 120


def make_console() -> Console:
    """A console on the current stdout (created per command, so tests can capture it)."""
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, PIPE_WIDTH)
    return console


def run_benchmark(
    console: Console,
    runner: CorralRunner,
    benchmark_id: str,
    run_kwargs: Mapping[str, Any],
    *,
    progress: bool,
    as_json: bool = False,
) -> BenchmarkReport:
    """Run (or resume) ``benchmark_id``, with the live display on a terminal, and print
    its report as a table, or as JSON."""
    display = ProgressDisplay(console) if progress and not as_json and console.is_terminal else None
    notice = ResumeNotice()

    async def go() -> BenchmarkReport:
        if display is None:
            return await runner.run(benchmark_id, **run_kwargs, observers=[notice])
        async with display.refreshing():
            return await runner.run(benchmark_id, **run_kwargs, observers=[notice, display])

    try:
        # The first Ctrl-C cancels the run: running work stops, the store closes
        # cleanly; a second one, while that happens, exits at once (the store's
        # transactions are atomic, so even that loses nothing acknowledged).
        report = anyio.run(go)
    except KeyboardInterrupt:
        click.echo(
            f"interrupted: resume with the same command (benchmark id {benchmark_id!r}); "
            "finished trials are kept",
            err=True,
        )
        raise click.Abort() from None
    print_report(console, report, report_path(runner.store, benchmark_id), as_json=as_json)
    return report


class ResumeNotice:
    """Says (on stderr, so ``--json`` stays parseable) what an earlier run of the same
    benchmark id already finished."""

    def on_run_start(self, info: RunInfo) -> None:
        if info.resumed:
            total = len(info.plan.task_ids) * info.plan.trials_per_task
            click.echo(
                f"resuming {info.benchmark_id}: {info.resumed:,} of {total:,} trials done",
                err=True,
            )

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        pass


def print_report(
    console: Console, report: BenchmarkReport, json_path: Path | None, *, as_json: bool
) -> None:
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
        return
    for renderable in report_renderables(report, json_path):
        console.print(renderable)
