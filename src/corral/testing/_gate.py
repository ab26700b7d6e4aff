"""`Gate`: a one-shot barrier that tests open when they choose."""

from __future__ import annotations

import anyio


class Gate:
    """Tasks ``await gate.wait()`` until someone calls ``gate.open()``; then all pass.

    A gate can be created outside an event loop. ``waiting`` is how many tasks are
    blocked in `wait` right now, so a test can see who is held without sleeping.
    """

    __slots__ = ("_event", "_waiting")

    def __init__(self) -> None:
        self._event = anyio.Event()
        self._waiting = 0

    def __repr__(self) -> str:
        state = "open" if self.is_open else f"closed, {self._waiting} waiting"
        return f"<Gate {state}>"

    @property
    def is_open(self) -> bool:
        return self._event.is_set()

    @property
    def waiting(self) -> int:
        """How many tasks are blocked in `wait`."""
        return self._waiting

    def open(self) -> None:
        """Let every waiting task through, and every later one at once."""
        self._event.set()

    async def wait(self) -> None:
        """Block until the gate is open (a checkpoint even when it already is)."""
        self._waiting += 1
        try:
            await self._event.wait()
        finally:
            self._waiting -= 1
