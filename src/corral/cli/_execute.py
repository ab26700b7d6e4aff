"""Running a benchmark from the command line: progress while it runs, the report after."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import click
from rich.console import Console

from .._runner import CorralRunner, report_path
from ..progress import ProgressDisplay
from ..report import BenchmarkReport
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

    async def go() -> BenchmarkReport:
        if display is None:
            return await runner.run(benchmark_id, **run_kwargs)
        async with display.refreshing():
            return await runner.run(benchmark_id, **run_kwargs, observers=[display])

    report = anyio.run(go)
    print_report(console, report, report_path(runner.store, benchmark_id), as_json=as_json)
    return report


def print_report(
    console: Console, report: BenchmarkReport, json_path: Path | None, *, as_json: bool
) -> None:
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
        return
    for renderable in report_renderables(report, json_path):
        console.print(renderable)
