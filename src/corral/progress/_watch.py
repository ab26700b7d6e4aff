"""`RunWatch`: what every progress view shares: the run's tally, its clock, the ETA,
a timer, and never failing the run."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Self

import anyio

from .._run_info import RunInfo
from .._types import Commit
from ..scheduler import KeyedLimit, LimitPhase
from ..store._protocol import TrialKey
from ._eta import Lane, estimate_eta
from ._tally import LaneTally, Tally
from ._view import Snapshot

log = logging.getLogger("corral")


class RunWatch:
    """An observer of one run's durable commits that shows them somewhere.

    Each commit costs a few integer updates; a subclass says when it is worth
    showing (`_due`) and how (`_begin`, `_draw`, `_end`, `_close`). Wrap the run
    in ``async with watch.refreshing():`` to also show while no commit arrives.
    A failure inside turns the view off (``error`` says why) and never reaches
    the run.
    """

    def __init__(self, *, tick: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.tally = Tally()
        #: The exception that turned the view off, if one did.
        self.error: Exception | None = None
        self._tick_every = tick
        self._clock = clock
        self._info: RunInfo | None = None
        self._active = False
        self._started = 0.0
        self._stopping = False
        # Trials in the run per key of each keyed execution limit: the ETA's lanes.
        self._totals: dict[KeyedLimit, dict[str, int]] = {}

    # -- what a subclass provides -------------------------------------------

    def _begin(self, now: float) -> None:
        """The run started (``now``): open the view."""

    def _due(self, now: float) -> bool:
        return True

    def _draw(self, now: float) -> None:
        """Show the current state."""

    def _end(self, now: float) -> None:
        """The run ended: show the final state."""
        self._draw(now)

    def _close(self) -> None:
        """Release what `_begin` took (also after a failure)."""

    # -- observer hooks -------------------------------------------------------

    def on_run_start(self, info: RunInfo) -> None:
        if self.error is not None:
            return
        try:
            self._info = info
            self.tally = self._tally_for(info)
            self._started = self._clock()
            self._active = True
            self._begin(self._started)
        except Exception as exc:
            self._fail(exc)

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        if not self._active:
            return
        try:
            self.tally.add(commit, key)
            now = self._clock()
            if self._due(now):
                self._draw(now)
        except Exception as exc:
            self._fail(exc)

    def on_run_end(self, info: RunInfo) -> None:
        if not self._active:
            return
        try:
            self._end(self._clock())
        except Exception as exc:
            self._fail(exc)
        self._stop()

    def stopping(self) -> None:
        """Say, from now on, that the run is stopping (after a Ctrl-C)."""
        self._stopping = True
        if self._active:
            try:
                self._draw(self._clock())
            except Exception as exc:
                self._fail(exc)

    @asynccontextmanager
    async def refreshing(self) -> AsyncIterator[Self]:
        """Show on a timer too while the block runs, not only when commits arrive."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._tick)
            try:
                yield self
            finally:
                tg.cancel_scope.cancel()

    async def _tick(self) -> None:
        while True:
            await anyio.sleep(self._tick_every)
            if not self._active:
                continue
            try:
                now = self._clock()
                if self._due(now):
                    self._draw(now)
            except Exception as exc:
                self._fail(exc)

    # -- the state shown ------------------------------------------------------

    def snapshot(self) -> Snapshot | None:
        """Everything a frame shows, now (None before the run starts)."""
        info = self._info
        if info is None:
            return None
        statistics = info.statistics()
        elapsed = self._clock() - self._started
        remaining = statistics.total - self.done
        eta, binding = estimate_eta(remaining, self.done_now, elapsed, self._lanes(info))
        return Snapshot(
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

    @property
    def done(self) -> int:
        """Trials done and durable, an earlier run's included. Not the scheduler's
        ``finished``: that counts trials whose commits are still on their way to the
        store (a second Ctrl-C would lose them)."""
        return self.tally.finished + self.tally.resumed

    @property
    def done_now(self) -> int:
        """Trials this run finished, durable (an earlier run's do not count)."""
        return self.tally.finished

    def _tally_for(self, info: RunInfo) -> Tally:
        plan = info.plan
        declared = [
            limit for limit in info.limits.declarations if limit.phase is LimitPhase.EXECUTION
        ]
        metas = plan.lights()
        keys = [limit.keys(metas, info.eval_keys) for limit in declared]
        lanes: dict[str, tuple[str | None, ...]] = {}
        shared: dict[tuple[str | None, ...], tuple[str | None, ...]] = {}
        totals: dict[KeyedLimit, dict[str, int]] = {limit: {} for limit in declared}
        n = plan.trials_per_task
        for t, task_id in enumerate(plan.task_ids):
            where = tuple(of_limit[t] for of_limit in keys)
            lanes[task_id] = shared.setdefault(where, where)  # one tuple per lane, not per task
            for limit, key in zip(declared, where, strict=True):
                if key is not None:
                    of_limit = totals[limit]
                    of_limit[key] = of_limit.get(key, 0) + n
        self._totals = totals
        tally = Tally(lanes, [limit.statistics for limit in declared])
        # The records of resumed trials, if the runner hands them over; else only
        # their count is known, and pass@1 so far is this run's.
        tally.resume(info.resumed, info.resumed_records)
        return tally

    def _lanes(self, info: RunInfo) -> list[Lane]:
        """The work left behind each limit, for the ETA."""
        statistics, limits, tally = info.statistics(), info.limits, self.tally
        total = statistics.total
        lanes = [
            Lane(
                "max_parallel",
                total - self.done,
                limits.max_parallel,
                tally.overall.mean_duration,
            )
        ]
        for limit, totals in self._totals.items():
            caps, effective = limits.keyed(limit), statistics.effective(limit)
            counted = tally.by_limit.get(limit.statistics, {})
            for key, planned in totals.items():
                cap = effective.get(key, caps.get(key, limits.max_parallel))
                lane = counted.get(key) or LaneTally()
                lanes.append(
                    Lane(f"{limit.label} {key}", planned - lane.finished, cap, lane.mean_duration)
                )
        return lanes

    # -- failure --------------------------------------------------------------

    def _fail(self, exc: Exception) -> None:
        self.error = exc
        if isinstance(exc, BrokenPipeError):
            # The reader went away (`corral run ... | head`): nothing more to show, and
            # no failure of the display's to report.
            log.debug("the progress display's reader went away: %r", exc)
        else:
            log.warning("the progress display failed and was turned off: %r", exc)
        self._stop()

    def _stop(self) -> None:
        if not self._active:
            return
        self._active = False
        try:
            self._close()
        except Exception:  # the output is already in trouble; the run must go on
            log.debug("closing the progress display failed", exc_info=True)
