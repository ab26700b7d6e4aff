"""``corral report``, ``corral show`` and ``corral list``: read what a store holds."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.table import Table
from rich.text import Text

from .._errors import ConfigError, StoreError
from .._terminal import clean
from .._types import TrialRecord
from ..history import StoredConfig
from ..report import BenchmarkReport, is_finished
from ..report._build import task_list
from ..report._files import check_not_overwriting, check_writable, report_path, write_report
from ..report._passk import default_ks
from ..report._stored import stored_report
from ..store import BenchmarkInfo, CommitStore, Copied, copy_benchmarks
from ..store._heads import BenchmarkOverview, HeadStore, TaskList
from ..store._open import shown_address
from ..store._runs import RunRecord
from ._execute import make_console, print_report
from ._history import header as _header
from ._history import load_history, no_benchmark, render_history
from ._options import k_option, open_store, read_store, run_async, store_option
from ._tables import ID_OVERFLOW
from ._transcript import render_transcript, transcript_dict

T = TypeVar("T")
Records = Mapping[tuple[str, int], TrialRecord]


def with_store(where: str, job: Callable[[CommitStore], Awaitable[T]]) -> T:
    """Open the store at ``where`` (an SQLite file must exist: reading never creates
    one; a PostgreSQL URI) and run job."""
    store = reading_store(where)

    async def go() -> T:
        async with store.opened():
            return await job(store)

    return run_async(go)


def reading_store(where: str) -> CommitStore:
    """A store to read from: it must exist, and reading never changes it."""
    return read_store(where)


async def rebuild_report(
    store: CommitStore, benchmark_id: str, ks: Sequence[int] = ()
) -> BenchmarkReport:
    """The report of ``benchmark_id`` from the store alone (no agents, nothing runs).

    k values: ``ks``, else `default_ks` (never the last run's: a view, not a fact).
    The store's run records give what the trials do not: the tasks the last run's
    dependency closure added (a rescore keeps them) and, only while no commit
    changed that run's tasks since, its reused trials, budgets, timings and why it
    stopped, so those figures are the run's own. A store written before Corral kept
    run records has them from the report file its last run wrote beside it.
    """
    # What the report needs of the configuration, without decoding it whole (a
    # configuration of 100,000 tasks is a hundred MB of dicts): read whole only where
    # more is needed, or where the light read finds something to say.
    listed = await store.task_list(benchmark_id) if isinstance(store, HeadStore) else None
    whole: list[Mapping[str, Any]] = []

    async def config() -> Mapping[str, Any]:
        if not whole:
            found = await store.benchmark_config(benchmark_id)
            if found is None:
                raise await no_benchmark(store, benchmark_id)
            whole.append(found)
        return whole[0]

    if listed is None:
        listed = task_list(await config())
    trials = listed.trials_per_task
    if not ks:
        ks = default_ks(trials)
    for k in ks:
        if not 1 <= k <= trials:
            raise ConfigError(f"k = {k} is outside 1..{trials} (trials_per_task = {trials})")
    runs = await store.runs(benchmark_id) or _saved_run(store, benchmark_id, listed)
    report = await stored_report(
        store,
        benchmark_id,
        listed,
        k_values=sorted(set(ks)),
        added=runs[-1].added if runs else (),
    )
    del listed
    if runs and await _describes(store, runs[-1], config, report):
        last = runs[-1]
        report = replace(
            report,
            resumed=last.resumed,
            budgets=dict(last.budgets),
            stopped=last.stopped,
            timings=dict(last.timings),
        )
    # The last run's (or rescore's) labels and provenance, whatever changed since.
    return report.labelled(runs[-1] if runs else None)


def _saved_run(store: CommitStore, benchmark_id: str, listed: TaskList) -> list[RunRecord]:
    """The last run's record as the JSON report it wrote gives it (a store written before
    run records were kept); none if there is no such file, or another benchmark's."""
    path = report_path(store, benchmark_id)
    if path is None or not path.is_file():
        return []
    try:
        saved = json.loads(path.read_text())
        if saved.get("benchmark_id") != benchmark_id:
            return []
        span = (saved["started_at"], saved["finished_at"])
        # The file holds the whole benchmark: its figures describe every task.
        task_ids = [task_id for task_id, _, _ in listed.tasks]
        fields = {"kind": "run", "started": 0, "ended": 0, "task_ids": task_ids}
        return [
            RunRecord.from_dict(
                {**saved, **fields, "span": span, "added": saved.get("added_by_dependencies", ())}
            )
        ]
    except (OSError, ValueError, AttributeError, KeyError, TypeError, StoreError):
        return []


async def _describes(
    store: CommitStore,
    run: RunRecord,
    config: Callable[[], Awaitable[Mapping[str, Any]]],
    report: BenchmarkReport,
) -> bool:
    """True if no commit changed ``run``'s tasks since it ended: the store gives its
    tasks the counts and span its report had (``report``: the whole benchmark's;
    ``config`` reads its configuration)."""
    if len(run.task_ids) == len(report.tasks) and all(t in report.tasks for t in run.task_ids):
        mine = report
    else:
        stored = StoredConfig.decode(await config())
        tasks = stored.tasks
        if not all(t in tasks for t in run.task_ids):
            return False
        ran = StoredConfig(stored.trials_per_task, {t: tasks[t] for t in run.task_ids})
        mine = await stored_report(store, report.benchmark_id, ran.encode(), k_values=(1,))
    return mine.counts == run.counts and (mine.started_at, mine.finished_at) == run.span


async def count_finished(store: CommitStore, info: BenchmarkInfo) -> int:
    """Finished trials of a benchmark as its report (and a resume) counts them."""
    stored = StoredConfig.decode(info.config)
    tasks, trials = stored.tasks, stored.trials_per_task
    if isinstance(store, HeadStore):
        return await store.finished_trials(info.benchmark_id, trials)
    finished = 0
    async for chunk in store.scan(info.benchmark_id):
        for s in chunk:
            if s.task_id in tasks and 0 <= s.trial < trials and is_finished(s):
                finished += 1
    return finished


@click.command("report")
@click.argument("benchmark_id")
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@k_option
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write the report as JSON to this file, as a run writes its report file "
    "(whole or not at all).",
)
def report_command(
    benchmark_id: str, store: str, as_json: bool, ks: tuple[int, ...], output: Path | None
) -> None:
    """Rebuild a benchmark's report from the store and print it.

    Without -k: 1, 2, 4, ... up to the trials per task, and the trials per task
    itself, whatever -k a run was given. Says whether every trial finished, and
    groups trial errors and failed evaluations by message. With --output, the
    file is the one the last run wrote (given its -k), byte for byte: the way
    back when a run's report file could not be written.
    """
    check_writable(output)

    async def job(opened: CommitStore) -> tuple[BenchmarkReport, Path | None]:
        report = await rebuild_report(opened, benchmark_id, ks)
        if output is not None:  # its records read from the store as it is written
            check_not_overwriting(output, opened)
            try:
                write_report(output, report)
            except OSError as exc:
                reason = exc.strerror or str(exc) or type(exc).__name__
                raise ConfigError(
                    f"report file {str(output)!r} could not be written ({reason})"
                ) from None
        path = report_path(opened, benchmark_id)
        return report, path if path is not None and path.is_file() else None

    report, path = with_store(store, job)
    print_report(make_console(), report, output or path, as_json=as_json, store=store)


@click.command("show")
@click.argument("benchmark_id")
@click.argument("task")
@click.argument("trial", type=int)
@store_option
@click.option("--json", "as_json", is_flag=True, help="Print the history as JSON.")
@click.option(
    "--transcript",
    is_flag=True,
    help="Print the trial's conversation with its models, call by call (with --json: "
    "each call, and the messages it added, as JSON).",
)
def show_command(
    benchmark_id: str, task: str, trial: int, store: str, as_json: bool, transcript: bool
) -> None:
    """Show one trial's commit history and the inputs it got from its parents; with
    --transcript, its model calls as a chat (prompts, replies, reasoning, tool calls and
    results, each call's latency, tokens and cost, failed tries)."""
    history = with_store(store, lambda s: load_history(s, benchmark_id, task, trial))
    if as_json:
        data = transcript_dict(history) if transcript else history.to_dict()
        click.echo(json.dumps(data, indent=2, default=str))
        return
    if transcript:
        make_console().print(_header(history), render_transcript(history))
        return
    make_console().print(render_history(history))


@click.command("list")
@store_option
@click.option(
    "--tag",
    "wanted",
    multiple=True,
    help="Only benchmarks with a run tagged so (repeatable: every tag must be there).",
)
def list_command(store: str, wanted: tuple[str, ...]) -> None:
    """List the benchmarks in the store, with trials finished / total and their runs' tags.

    A trial is finished as in `corral report` (and as a resume sees it): it ended and,
    if its status is scored, it was scored.
    """

    async def job(opened: CommitStore) -> list[tuple[BenchmarkOverview, int, tuple[str, ...]]]:
        found = []
        for b in await _overview(opened):
            tags = tuple(
                dict.fromkeys(t for run in await opened.runs(b.benchmark_id) for t in run.tags)
            )
            if all(t in tags for t in wanted):
                found.append((b, await _finished(opened, b), tags))
        return found

    benchmarks = with_store(store, job)
    console = make_console()
    if not benchmarks:
        tagged = f" tagged {', '.join(map(repr, wanted))}" if wanted else ""
        console.print(f"no benchmarks{tagged} in {shown_address(store)}")
        return
    table = Table(title=f"benchmarks in {shown_address(store)}", title_justify="left")
    table.add_column("benchmark", overflow=ID_OVERFLOW)
    table.add_column("created (UTC)")
    table.add_column("tasks", justify="right")
    table.add_column("trials/task", justify="right")
    table.add_column("finished", justify="right")
    table.add_column("tags", overflow=ID_OVERFLOW)  # copied to --tag: never cut
    for b, finished, tags in benchmarks:
        table.add_row(
            b.benchmark_id,
            datetime.fromtimestamp(b.created_at, UTC).strftime("%Y-%m-%d %H:%M:%S"),
            str(b.tasks),
            str(b.trials_per_task),
            f"{finished}/{b.tasks * b.trials_per_task}",
            Text(" ".join(tags)),
        )
    console.print(table)


async def _overview(store: CommitStore) -> list[BenchmarkOverview]:
    """Every benchmark, oldest first: from a store that keeps heads without decoding
    any configuration, else (or where one needs a closer look) from `benchmarks`."""
    found = await store.overview() if isinstance(store, HeadStore) else None
    if found is not None:
        return found
    out = []
    for b in await store.benchmarks():
        stored = StoredConfig.decode(b.config)
        out.append(
            BenchmarkOverview(
                b.benchmark_id, b.created_at, len(stored.tasks), stored.trials_per_task
            )
        )
    return out


async def _finished(store: CommitStore, b: BenchmarkOverview) -> int:
    if isinstance(store, HeadStore):
        return await store.finished_trials(b.benchmark_id, b.trials_per_task)
    info = await store.benchmark_config(b.benchmark_id)
    assert info is not None
    return await count_finished(store, BenchmarkInfo.of(b.benchmark_id, b.created_at, info, 0))


@click.command("copy")
@click.argument("source", metavar="SRC")
@click.argument("destination", metavar="DST")
@click.option(
    "--benchmark", "benchmarks", multiple=True, help="Copy only this benchmark (repeatable)."
)
def copy_command(source: str, destination: str, benchmarks: tuple[str, ...]) -> None:
    """Copy benchmarks from store SRC to store DST (SQLite files or PostgreSQL URIs).

    Moves a local run to a shared database and back. A benchmark DST already has
    must have the same configuration and, trial by trial, a prefix of SRC's
    commits (an interrupted copy is finished by running it again); anything else
    is refused before it is written. Every copied trial is read back and
    compared with SRC, commit by commit.
    """
    src = reading_store(source)
    dst = open_store(destination, "power")

    async def go() -> list[Copied]:
        return await copy_benchmarks(src, dst, benchmarks or None)

    for done in run_async(go):
        shown = clean(done.benchmark_id, one_line=True)  # a recorded id: never obeyed
        click.echo(
            f"copied {shown}: {done.trials:,} trials, {done.commits:,} commits "
            f"({done.new:,} new), verified"
        )
