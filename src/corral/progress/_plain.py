"""`PlainProgress`: progress as plain lines, for CI logs and anything not a terminal."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

from .._checks import non_negative_number, seconds
from ._per_task import held_by_task
from ._view import Snapshot, done_share, duration, outcomes, queue_reasons
from ._watch import RunWatch

#: Seconds between two lines when nothing else brings one.
DEFAULT_INTERVAL = 10.0


class PlainProgress(RunWatch):
    """An observer that writes a line when the run starts, then one every
    ``interval`` seconds or every tenth of the trials done, whichever comes
    first, and one when it ends: done/total, pass@1 so far, errors, rate and
    ETA, each line flushed at once (a log shows it while the run goes on).

    Lines are written on commits; wrap the run in ``async with
    progress.refreshing():`` for a line each interval also while none arrives.
    A failure inside turns it off (``error`` says why) and never reaches the run.
    """

    def __init__(
        self,
        stream: IO[str] | None = None,
        *,
        interval: float = DEFAULT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        tick: float | None = None,
    ) -> None:
        # Checked here: "5" would fail at the first commit, a tick of 0 spin the timer
        # with no pause. An interval of 0 (a line at every commit) times its idle lines
        # by the second.
        non_negative_number("interval", interval)
        tick = (min(1.0, interval) or 1.0) if tick is None else seconds("tick", tick)
        super().__init__(tick=tick, clock=clock)
        self.stream: IO[str] = sys.stdout if stream is None else stream
        self.interval = interval
        self._last = 0.0
        self._tenth = 0
        self._total = 0

    def write(self, line: str) -> None:
        """Write one line and flush it."""
        self.stream.write(line + "\n")
        self.stream.flush()

    def _begin(self, now: float) -> None:
        snapshot = self.snapshot()
        assert snapshot is not None  # the run has started
        self._total = snapshot.statistics.total
        self._last, self._tenth = now, self._tenths()
        self.write(start_line(snapshot, self.interval))

    def _due(self, now: float) -> bool:
        # On every commit: counters only, the snapshot is built when a line is due.
        tenths = self._tenths()
        if tenths >= 10:
            return False  # all done: the end line says so, with this run's time
        return now - self._last >= self.interval or tenths > self._tenth

    def _draw(self, now: float) -> None:
        snapshot = self.snapshot()
        if snapshot is not None:
            self._last, self._tenth = now, self._tenths()
            self.write(progress_line(snapshot))

    def _end(self, now: float) -> None:
        snapshot = self.snapshot()
        if snapshot is not None:
            self.write(progress_line(snapshot, final=True))

    def _tenths(self) -> int:
        done = self.tally.finished + self.tally.resumed
        return 10 * done // self._total if self._total else 10


def start_line(snapshot: Snapshot, interval: float) -> str:
    """What runs, under which limits, and how often a line follows."""
    s, limits = snapshot.statistics, snapshot.limits
    parts = [f"corral {snapshot.benchmark_id}: {s.total:,} trials"]
    if snapshot.resumed:
        parts[0] += f" ({snapshot.resumed:,} done by an earlier run)"
    parts += [
        f"max_parallel {limits.max_parallel}",
        f"max_parallel_per_task {limits.max_parallel_per_task}",
        f"a line every {interval:g} s or tenth done",
    ]
    return " · ".join(parts)


def progress_line(snapshot: Snapshot, *, final: bool = False) -> str:
    """One line of progress: done/total, what runs, pass@1 so far, errors, rate and ETA
    (or, when ``final``, this run's own time). Done counts durable trials only."""
    s, tally = snapshot.statistics, snapshot.tally
    done = tally.finished + tally.resumed
    parts = [
        f"corral {snapshot.benchmark_id} +{snapshot.elapsed:.1f} s: "
        f"{done:,}/{s.total:,} trials ({done_share(done, s.total)})",
        f"running {s.executing}",
        f"queued {s.ready}",
        f"evaluating {s.evaluating + s.awaiting_evaluation}",
        *outcomes(snapshot.tally),
        _rate(tally.finished, snapshot.elapsed),
    ]
    if final:
        parts.append(f"this run {snapshot.elapsed:.1f} s")
    else:
        eta = "-" if snapshot.eta is None else duration(snapshot.eta)
        if snapshot.eta and snapshot.binding:
            eta += f" (bound by {snapshot.binding})"
        parts.append(f"ETA {eta}")
        reasons = queue_reasons(s, snapshot.limits)
        held = held_by_task(s, snapshot.limits)
        if held:
            reasons.append(held)
        if reasons:
            parts.append(f"held by {', '.join(reasons)}")
    return " · ".join(parts)


def _rate(done: int, elapsed: float) -> str:
    per_second = done / elapsed if elapsed > 0 else 0.0
    if per_second * 60 < 10:
        return f"{per_second * 60:.1f} trials/min"
    return f"{per_second:.1f} trials/s"
