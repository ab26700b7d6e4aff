"""Reading a child process's output line by line, with a timeout."""

from __future__ import annotations

import queue
import threading
from typing import IO


class Lines:
    """A child's stream, line by line, with a timeout (a reader thread feeds a queue)."""

    def __init__(self, stream: IO[str]) -> None:
        self.queue: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            self.queue.put(line)
        self.queue.put("")

    def until(self, prefix: str) -> str:
        while True:
            try:  # generous: the machine may be busy; a hang fails after a minute
                line = self.queue.get(timeout=60)
            except queue.Empty:
                raise AssertionError(f"no {prefix!r} line within 60 s: {self.seen}") from None
            self.seen.append(line)
            if not line or line.startswith(prefix):
                assert line, f"no line starting with {prefix!r} in {self.seen}"
                return line.strip()

    def rest(self) -> str:
        out = []
        while (line := self.queue.get(timeout=60)) != "":
            out.append(line)
        return "".join(out)
