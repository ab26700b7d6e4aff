"""The run loop's seam for running admitted work elsewhere (the Ray executor).

In process, each admitted execution or evaluation runs in a worker task of the
run loop. A `Remote` takes the admitted starts instead, sends them on in
batches, and reports each end back to the loop (`RunLoop.executed`,
`RunLoop.evaluated`); admission stays in the loop, so the limits stay exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ._admission import Start
    from ._run import RunLoop


class Remote(Protocol):
    @property
    def busy(self) -> int:
        """Starts handed over whose end the loop has not been told yet."""
        ...

    def start(self, start: Start) -> None:
        """Take one admitted start (execution or evaluation); sent at the next `flush`."""
        ...

    def flush(self) -> None:
        """Send what `start` took since the last flush (called after every admission)."""
        ...

    async def run(self, loop: RunLoop) -> None:
        """Run until the loop's admission is complete and nothing is busy; on return or
        cancellation, nothing handed over runs any more."""
        ...
