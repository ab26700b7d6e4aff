"""`ProgressDisplay`: a rich Live view of a run, fed by its durable commits."""

from __future__ import annotations

import time
from collections.abc import Callable

from rich.console import Console, RenderableType
from rich.live import Live
from rich.text import Text

from .._checks import flag, positive_number
from .._terminal import SafeConsole
from ._view import render
from ._watch import RunWatch


class ProgressDisplay(RunWatch):
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
        rate = positive_number("refresh_per_second", refresh_per_second)
        super().__init__(tick=1.0 / rate, clock=clock)
        self.console = console if console is not None else SafeConsole()
        self._interval = 1.0 / rate
        self._transient = flag("transient", transient)  # "no" read by its truth would clear
        self._live: Live | None = None
        self._next = 0.0

    def renderable(self) -> RenderableType:
        """The current frame (what the live area shows)."""
        snapshot = self.snapshot()
        if snapshot is None:
            return Text("corral: waiting for a run to start")
        return render(snapshot)

    def _begin(self, now: float) -> None:
        live = Live(console=self.console, auto_refresh=False, transient=self._transient)
        live.start()
        self._live = live
        self._draw(now)

    def _due(self, now: float) -> bool:
        return now >= self._next

    def _draw(self, now: float) -> None:
        self._next = now + self._interval
        if self._live is not None:
            self._live.update(self.renderable(), refresh=True)

    def _end(self, now: float) -> None:
        self._draw(now)  # the final counts, before the live area closes
        info = self._info
        if info is None:
            return
        # The live area goes; this stays: a report's wall time spans earlier runs too.
        earlier = f" ({info.resumed:,} done by an earlier run)" if info.resumed else ""
        self.console.print(
            f"corral {info.benchmark_id}: this run {self.done_now:,} trials in "
            f"{now - self._started:.1f} s{earlier}",
            markup=False,
            highlight=False,
        )

    def _close(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()
