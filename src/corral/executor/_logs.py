"""Ray's own output kept out of the user's terminal: its Python logging goes to a file,
and the colour codes of its error texts are stripped where Corral's messages quote them."""

from __future__ import annotations

import logging
import os
import re
import tempfile
from pathlib import Path

#: ANSI escape sequences (colours, cursor moves) as Ray puts them in its tracebacks.
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]")


def plain(text: object) -> str:
    """``str(text)`` without terminal colour codes."""
    return _ANSI.sub("", str(text))


def default_log_file() -> Path:
    """Where the CLI sends Ray's logs: one file per process, in the temporary directory."""
    return Path(tempfile.gettempdir()) / "corral" / f"ray-{os.getpid()}.log"


class RayLog:
    """While active, what Ray logs in this process (``ray`` and its child loggers) goes
    to ``path`` (appended) instead of the terminal; `stop` puts Ray's handlers back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._saved: tuple[list[logging.Handler], bool] | None = None
        self._handler: logging.Handler | None = None

    def start(self) -> None:
        if self._saved is not None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(self.path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        logger = logging.getLogger("ray")
        self._saved = (list(logger.handlers), logger.propagate)
        self._handler = handler
        logger.handlers = [handler]
        logger.propagate = False  # not to the root logger's (the terminal's) handlers

    def stop(self) -> None:
        if self._saved is None:
            return
        logger = logging.getLogger("ray")
        logger.handlers, logger.propagate = self._saved
        self._saved = None
        assert self._handler is not None
        self._handler.close()
        self._handler = None
