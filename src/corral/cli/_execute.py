"""Running a benchmark from the command line: progress while it runs, the report after."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import anyio
import click
from rich.console import Console

from .._protocols import Observer
from .._runner import CorralRunner, RunInfo, report_path
from .._types import EVALUATED_STATUSES, Commit, TrialStatus
from ..progress import ProgressDisplay, Tally
from ..report import BenchmarkReport
from ..store import TrialKey
from ._progress import Progress, print_notes
from ._tables import report_renderables

#: Exit codes (``corral --help`` lists them): a clean run, a run with errors or
#: unfinished trials (or a Corral failure), bad input, an interrupted run.
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

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
    progress: Progress,
    as_json: bool = False,
    rescore: bool = False,
) -> int:
    """Run (or resume) ``benchmark_id``, showing ``progress``, print
    its report as a table, or as JSON, and return the exit code (see `exit_code`).
    With ``rescore``, score its finished trials again instead (`CorralRunner.rescore`)."""
    start = runner.rescore if rescore else runner.run
    watch = progress.make(console, as_json=as_json)
    display = watch if isinstance(watch, ProgressDisplay) else None
    notice = ResumeNotice()
    interrupts = Interrupts(notice, display)
    observers: list[Observer] = [notice] if watch is None else [notice, watch]

    async def go() -> BenchmarkReport | None:
        async with interrupts.cancelling():
            if watch is None:
                return await start(benchmark_id, **run_kwargs, observers=observers)
            async with watch.refreshing():
                return await start(benchmark_id, **run_kwargs, observers=observers)
        return None  # cancelled by the first Ctrl-C

    # The first Ctrl-C cancels the run: running work stops, the store closes cleanly;
    # a second one exits at once (see `Interrupts`).
    with interrupts.installed():
        report = anyio.run(go)
    if report is None:
        click.echo(
            f"interrupted: resume with the same command (benchmark id {benchmark_id!r}); "
            "finished trials are kept",
            err=True,
        )
        return EXIT_INTERRUPTED
    print_report(console, report, report_path(runner.store, benchmark_id), as_json=as_json)
    if not as_json:
        print_notes(console, notice.info)
    return exit_code(report)


def exit_code(report: BenchmarkReport) -> int:
    """`EXIT_FAILED` when a trial ended ``error``, an evaluation failed, or a trial is
    unfinished (a run stopped early); else `EXIT_OK`."""
    finished = 0
    for task in report.tasks.values():
        for record in task.trials:
            finished += 1
            if record.status == TrialStatus.ERROR or record.evaluation_error:
                return EXIT_FAILED
            if record.status in EVALUATED_STATUSES and record.evaluation is None:
                return EXIT_FAILED  # a scorer that failed, or one that never ran
    return EXIT_OK if finished >= len(report.tasks) * report.trials_per_task else EXIT_FAILED


class ResumeNotice:
    """Says (on stderr, so ``--json`` stays parseable) what an earlier run of the same
    benchmark id already finished; keeps the run's `RunInfo` for a Ctrl-C to read."""

    def __init__(self) -> None:
        self.info: RunInfo | None = None
        #: This run's durable commits: what a Ctrl-C reports as done.
        self.tally = Tally()

    def on_run_start(self, info: RunInfo) -> None:
        self.info = info
        if info.resumed:
            total = len(info.plan.task_ids) * info.plan.trials_per_task
            click.echo(
                f"resuming {info.benchmark_id}: {info.resumed:,} of {total:,} trials done",
                err=True,
            )

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        self.tally.add(commit)


def print_report(
    console: Console, report: BenchmarkReport, json_path: Path | None, *, as_json: bool
) -> None:
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
        return
    for renderable in report_renderables(report, json_path):
        console.print(renderable)


class Interrupts:
    """Ctrl-C during a run. The first press cancels the run (running work stops, the
    store closes cleanly) and says so at once, with how many trials are done. The
    second exits the process at once, even while user code blocks the event loop
    or a worker thread: `os._exit` skips waiting for threads, which loses nothing
    acknowledged (the store is WAL; its transactions are atomic).

    A Python-level SIGINT handler runs between bytecodes of the main thread, so it
    runs even inside a blocking ``time.sleep``; it only sets a flag, writes to a file
    descriptor and hands the cancellation to the event loop thread-safely.
    """

    def __init__(self, notice: ResumeNotice, display: ProgressDisplay | None) -> None:
        self.presses = 0
        self._notice = notice
        self._display = display
        self._schedule: Callable[[Callable[[], None]], object] | None = None
        self._cancel: Callable[[], None] | None = None

    @contextmanager
    def installed(self) -> Iterator[None]:
        try:
            previous = signal.signal(signal.SIGINT, self._handle)
        except ValueError:  # not the main thread: Ctrl-C is not ours to handle
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    @asynccontextmanager
    async def cancelling(self) -> AsyncIterator[None]:
        """A cancel scope that the first Ctrl-C cancels from the event loop."""
        with anyio.CancelScope() as scope:

            def cancel() -> None:
                scope.cancel()
                if self._display is not None:
                    self._display.stopping()

            self._schedule, self._cancel = _loop_scheduler(), cancel
            try:
                if self.presses:  # pressed while the run was being set up
                    cancel()
                yield
            finally:
                self._schedule = self._cancel = None

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.presses += 1
        if self.presses > 1:
            self._exit_now()
        if self._display is None:
            _write(2, f"stopping: {self._done()}; Ctrl-C again to exit at once\n")
        schedule, cancel = self._schedule, self._cancel
        if schedule is not None and cancel is not None:
            schedule(cancel)

    def _done(self) -> str:
        info = self._notice.info
        if info is None:
            return "no trial started yet"
        # Durable trials only: the scheduler also counts those still on their way
        # to the store, which a second Ctrl-C would lose.
        done = info.resumed + self._notice.tally.finished
        total = len(info.plan.task_ids) * info.plan.trials_per_task
        return f"{done:,} of {total:,} trials done"

    def _exit_now(self) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: S110 - interrupted mid-write: what is buffered is lost
                pass
        if self._display is not None:
            _write(1, "\x1b[?25h\n")  # the live display hid the cursor
        _write(
            2,
            f"interrupted at once ({self._done()}): resume with the same command; "
            "acknowledged trials are kept\n",
        )
        os._exit(EXIT_INTERRUPTED)


def _loop_scheduler() -> Callable[[Callable[[], None]], object]:
    """How to run a callback on the current event loop from a signal handler."""
    try:
        return asyncio.get_running_loop().call_soon_threadsafe
    except RuntimeError:  # not asyncio: anyio's other backend
        import trio

        return trio.lowlevel.current_trio_token().run_sync_soon


def _write(fd: int, text: str) -> None:
    try:
        os.write(fd, text.encode("utf-8", "backslashreplace"))
    except OSError:  # a closed pipe: nothing more to say
        pass
