"""Fan-out of durable commits to observers, each isolated from the run."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from ._protocols import Observer
from ._types import Commit, TrialKey

log = logging.getLogger("corral")


class Observers:
    """Calls every observer for each acknowledged commit.

    An observer that raises is logged once and dropped: it never stops the
    run and never rolls a commit back.
    """

    def __init__(self, observers: Iterable[Observer]) -> None:
        self._observers = list(observers)
        self.failures: list[tuple[Observer, BaseException]] = []

    def drop(self, failed: Iterable[Observer]) -> None:
        """Tell ``failed`` (their ``on_run_start`` raised, logged) of no commit."""
        gone = [id(o) for o in failed]
        self._observers = [o for o in self._observers if id(o) not in gone]

    def __call__(self, key: TrialKey, commit: Commit) -> None:
        for observer in self._observers:
            try:
                observer.on_commit(key, commit)
            except Exception as exc:
                log.warning("observer %r failed and was dropped: %r", observer, exc)
                self.failures.append((observer, exc))
                self._observers = [o for o in self._observers if o is not observer]
