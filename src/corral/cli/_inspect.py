"""``corral report``, ``corral show`` and ``corral list``: read what a store holds."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import click
from rich.table import Table

from .._errors import ConfigError
from .._runner import report_path
from ..report import BenchmarkReport, build_report
from ..store import SQLiteStore
from ._execute import make_console, print_report
from ._history import load_history, render_history
from ._options import k_option, store_option

T = TypeVar("T")


def with_store(path: str, job: Callable[[SQLiteStore], Awaitable[T]]) -> T:
    """Open the store at ``path`` (which must exist: reading never creates one) and run job."""
    if not Path(path).is_file():
        raise ConfigError(f"no store at {path!r} (run a benchmark first, or pass --store)")
    store = SQLiteStore(path)

    async def go() -> T:
        async with store.opened():
            return await job(store)

    return anyio.run(go)


def default_ks(trials: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to the trial count, and the trial count itself."""
    ks = [1 << i for i in range(trials.bit_length()) if 1 << i <= trials]
    return tuple(ks if ks[-1] == trials else [*ks, trials])


def _saved_report(path: Path | None) -> dict[str, Any]:
    """The JSON report the last run wrote, for its k values and closure marks."""
    if path is None or not path.is_file():
        return {}
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return saved if isinstance(saved, dict) else {}


async def rebuild_report(
    store: SQLiteStore, benchmark_id: str, ks: Sequence[int] = ()
) -> BenchmarkReport:
    """The report of ``benchmark_id`` from the store alone (no agents, nothing runs)."""
    config = await store.benchmark_config(benchmark_id)
    if config is None:
        raise ConfigError(f"no benchmark {benchmark_id!r} in {str(store.path)!r}")
    trials = int(config["trials_per_task"])
    saved = _saved_report(report_path(store, benchmark_id))
    if not ks:
        ks = tuple(saved.get("k_values") or ()) or default_ks(trials)
    for k in ks:
        if not 1 <= k <= trials:
            raise ConfigError(f"k = {k} is outside 1..{trials} (trials_per_task = {trials})")
    summaries = await store.summaries(benchmark_id)
    ends = [c.created_at for s in summaries for c in (s.terminal, s.evaluation) if c is not None]
    started = min((s.started_at for s in summaries), default=0.0)
    return build_report(
        benchmark_id,
        config,
        summaries,
        k_values=sorted(set(ks)),
        added=saved.get("added_by_dependencies", ()),
        started_at=started,
        finished_at=max(ends, default=started),
    )


@click.command("report")
@click.argument("benchmark_id")
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@k_option
def report_command(benchmark_id: str, store: str, as_json: bool, ks: tuple[int, ...]) -> None:
    """Rebuild a benchmark's report from the store and print it.

    Without -k: the k values of the last run (or 1, 2, 4, ... up to the trials).
    """

    async def job(opened: SQLiteStore) -> tuple[BenchmarkReport, Path | None]:
        report = await rebuild_report(opened, benchmark_id, ks)
        path = report_path(opened, benchmark_id)
        return report, path if path is not None and path.is_file() else None

    report, path = with_store(store, job)
    print_report(make_console(), report, path, as_json=as_json)


@click.command("show")
@click.argument("benchmark_id")
@click.argument("task")
@click.argument("trial", type=int)
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print the history as JSON.")
def show_command(benchmark_id: str, task: str, trial: int, store: str, as_json: bool) -> None:
    """Show one trial's commit history and the inputs it got from its parents."""
    history = with_store(store, lambda s: load_history(s, benchmark_id, task, trial))
    if as_json:
        click.echo(json.dumps(history.to_dict(), indent=2, default=str))
        return
    make_console().print(render_history(history))


@click.command("list")
@store_option
def list_command(store: str) -> None:
    """List the benchmarks in the store, with trials finished / total."""

    async def job(opened: SQLiteStore) -> list[Any]:
        return await opened.benchmarks()

    benchmarks = with_store(store, job)
    console = make_console()
    if not benchmarks:
        console.print(f"no benchmarks in {store}")
        return
    table = Table(title=f"benchmarks in {store}", title_justify="left")
    table.add_column("benchmark", no_wrap=True)
    table.add_column("created (UTC)")
    table.add_column("tasks", justify="right")
    table.add_column("trials/task", justify="right")
    table.add_column("finished", justify="right")
    for b in benchmarks:
        table.add_row(
            b.benchmark_id,
            datetime.fromtimestamp(b.created_at, UTC).strftime("%Y-%m-%d %H:%M:%S"),
            str(len(b.config.get("tasks", {}))),
            str(b.config.get("trials_per_task")),
            f"{b.finished}/{b.trials}",
        )
    console.print(table)
