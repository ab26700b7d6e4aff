"""`ProgressDisplay`: a rich Live view of a run, fed by its durable commits."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio
from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from .._runner import RunInfo
from .._terminal import SafeConsole
from .._types import Commit
from ..store._protocol import TrialKey
from ._eta import Lane, estimate_eta
from ._tally import LaneTally, Tally
from ._view import Snapshot, render

log = logging.getLogger("corral")


class ProgressDisplay:
    """An observer that draws queued / running / evaluating / done counts, the
    utilisation of every limit, pass@1 so far, errors and an ETA.

    Pass it to ``CorralRunner.run(..., observers=[display])``. Each commit costs
    a few integer updates; the screen is redrawn at most ``refresh_per_second``
    times a second. Wrap the run in ``async with display.refreshing():`` to
    also redraw while no commit arrives (the clock and ETA keep moving).

    A failure inside the display turns it off (``error`` says why) and never
    reaches the run.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        refresh_per_second: float = 8.0,
        transient: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console if console is not None else SafeConsole()
        self.tally = Tally()
        #: The exception that turned the display off, if one did.
        self.error: Exception | None = None
        self._interval = 1.0 / refresh_per_second
        self._transient = transient
        self._clock = clock
        self._info: RunInfo | None = None
        self._live: Live | None = None
        self._started = 0.0
        self._finished_at_start = 0
        self._due = 0.0
        self._stopping = False
        # Trials in the run per model and per environment: the ETA's lanes.
        self._model_totals: dict[str, int] = {}
        self._environment_totals: dict[str, int] = {}

    # -- observer hooks -------------------------------------------------------

    def on_run_start(self, info: RunInfo) -> None:
        if self.error is not None:
            return
        try:
            self._info = info
            self.tally = self._tally_for(info)
            self._started = self._clock()
            # Trials an earlier run finished do not count towards this run's rate.
            self._finished_at_start = info.statistics().finished
            live = Live(console=self.console, auto_refresh=False, transient=self._transient)
            live.start()
            self._live = live
            self._refresh(self._started)
        except Exception as exc:
            self._fail(exc)

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        if self._live is None:
            return
        try:
            self.tally.add(commit, key)
            now = self._clock()
            if now >= self._due:
                self._refresh(now)
        except Exception as exc:
            self._fail(exc)

    def on_run_end(self, info: RunInfo) -> None:
        if self._live is None:
            return
        try:
            self._refresh(self._clock())  # the final counts, before the live area closes
        except Exception as exc:
            self._fail(exc)
        self._stop()

    def stopping(self) -> None:
        """Say, from the next frame on, that the run is stopping (after a Ctrl-C)."""
        self._stopping = True
        if self._live is not None:
            try:
                self._refresh(self._clock())
            except Exception as exc:
                self._fail(exc)

    def _tally_for(self, info: RunInfo) -> Tally:
        plan = info.plan
        lanes: dict[str, tuple[str | None, str]] = {}
        shared: dict[tuple[str | None, str], tuple[str | None, str]] = {}
        models: dict[str, int] = {}
        environments: dict[str, int] = {}
        n = plan.trials_per_task
        for t, task_id in enumerate(plan.task_ids):
            meta = plan.light(t)
            where = (meta.model, meta.environment_id)
            lanes[task_id] = shared.setdefault(where, where)  # one tuple per lane, not per task
            if meta.model is not None:
                models[meta.model] = models.get(meta.model, 0) + n
            environments[meta.environment_id] = environments.get(meta.environment_id, 0) + n
        self._model_totals, self._environment_totals = models, environments
        tally = Tally(lanes)
        # The records of resumed trials, if the runner hands them over; else only
        # their count is known, and pass@1 so far is this run's.
        tally.resume(info.resumed, info.resumed_records)
        return tally

    # -- drawing ------------------------------------------------------------

    @asynccontextmanager
    async def refreshing(self) -> AsyncIterator[ProgressDisplay]:
        """Redraw on a timer too while the block runs, not only when commits arrive."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._tick)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    async def _tick(self) -> None:
        while True:
            await anyio.sleep(self._interval)
            if self._live is None:
                continue
            try:
                now = self._clock()
                if now >= self._due:
                    self._refresh(now)
            except Exception as exc:
                self._fail(exc)

    def renderable(self) -> RenderableType:
        """The current frame (what the live area shows)."""
        info = self._info
        if info is None:
            return Text("corral: waiting for a run to start")
        statistics = info.statistics()
        elapsed = self._clock() - self._started
        done_now = statistics.finished - self._finished_at_start
        remaining = statistics.total - statistics.finished
        eta, binding = estimate_eta(remaining, done_now, elapsed, self._lanes(info))
        return render(
            Snapshot(
                benchmark_id=info.benchmark_id,
                elapsed=elapsed,
                statistics=statistics,
                limits=info.limits,
                tally=self.tally,
                resumed=info.resumed,
                eta=eta,
                scopes=info.scopes(),
                binding=binding,
                stopping=self._stopping,
                budgets=info.budgets,
                spent=info.spent(),
            )
        )

    def _lanes(self, info: RunInfo) -> list[Lane]:
        """The work left behind each limit, for the ETA."""
        statistics, limits, tally = info.statistics(), info.limits, self.tally
        total = statistics.total
        lanes = [
            Lane(
                "max_parallel",
                total - statistics.finished,
                limits.max_parallel,
                tally.overall.mean_duration,
            )
        ]
        models = {
            m: statistics.effective_by_model.get(
                m, limits.max_parallel_by_model.get(m, limits.max_parallel)
            )
            for m in self._model_totals
        }
        environments = {
            e: limits.max_parallel_by_environment.get(e, limits.max_parallel)
            for e in self._environment_totals
        }
        for name, totals, counted, limit in (
            ("model", self._model_totals, tally.models, models),
            ("environment", self._environment_totals, tally.environments, environments),
        ):
            for key, planned in totals.items():
                lane = counted.get(key) or LaneTally()
                lanes.append(
                    Lane(f"{name} {key}", planned - lane.finished, limit[key], lane.mean_duration)
                )
        return lanes

    def _refresh(self, now: float) -> None:
        self._due = now + self._interval
        if self._live is not None:
            self._live.update(self.renderable(), refresh=True)

    def _fail(self, exc: Exception) -> None:
        self.error = exc
        log.warning("the progress display failed and was turned off: %r", exc)
        self._stop()

    def _stop(self) -> None:
        live, self._live = self._live, None
        if live is None:
            return
        try:
            live.stop()
        except Exception:  # the terminal is already in trouble; the run must go on
            log.debug("stopping the live display failed", exc_info=True)
