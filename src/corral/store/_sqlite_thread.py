"""One SQLite connection, touched by one thread at a time, whatever cancels its caller.

anyio shields a worker thread from a cancel scope, but not from asyncio's own
``Task.cancel()``: the awaiting coroutine then raises at once while the thread
still runs, and the next caller could start a second thread on the same
connection, or close it under the first (a segfault in sqlite3). So every use
goes through `Owned.call`, which holds an async lock until its thread has
finished, however the caller was cancelled, and a thread lock while on the
thread, which is the rule itself: no two threads in one connection at once.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import TypeVar

import anyio
import anyio.to_thread

T = TypeVar("T")


class _Abandoned(Exception):
    """A call whose caller was cancelled before its thread picked it up."""


async def in_thread(func: Callable[[], T]) -> T:
    """``func()`` in a worker thread; if the caller is cancelled, wait out the thread first.

    A call cancelled before its thread started never runs at all (the thread
    sees it was abandoned), so there is never a thread nobody waits for.
    """
    lock = threading.Lock()
    state = ["pending"]  # -> "running" -> "done", or -> "abandoned"
    finished = threading.Event()

    def run() -> T:
        with lock:
            if state[0] == "abandoned":
                raise _Abandoned  # nobody awaits this outcome
            state[0] = "running"
        try:
            return func()
        finally:
            state[0] = "done"
            finished.set()

    try:
        return await anyio.to_thread.run_sync(run)
    except BaseException:
        with lock:
            if state[0] == "pending":
                state[0] = "abandoned"
        # Only asyncio's Task.cancel() gets here with the thread still running.
        with anyio.CancelScope(shield=True):
            while state[0] == "running":
                try:
                    await anyio.to_thread.run_sync(finished.wait)
                except BaseException:  # cancelled again: the thread still has to end
                    continue
        raise


class Owned:
    """A connection and the locks that keep it to one thread at a time."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        renew: Callable[[sqlite3.Connection], sqlite3.Connection] | None = None,
    ) -> None:
        self._conn: sqlite3.Connection | None = conn
        #: Called with the connection before each use: the one to use from then on.
        self._renew = renew
        self._thread_lock = threading.Lock()
        self._lock = anyio.Lock()

    def _use(self, func: Callable[[sqlite3.Connection], T]) -> T:
        with self._thread_lock:
            if self._conn is None:
                raise sqlite3.ProgrammingError("Cannot operate on a closed database.")
            if self._renew is not None:
                self._conn = self._renew(self._conn)
            return func(self._conn)

    def here(self, func: Callable[[sqlite3.Connection], T]) -> T:
        """``func(connection)`` on the calling thread (one of the store's own, never
        the event loop's), alone in the connection."""
        return self._use(func)

    async def call(self, func: Callable[[sqlite3.Connection], T]) -> T:
        """``func(connection)`` on a worker thread, alone in the connection."""
        async with self._lock:
            return await in_thread(lambda: self._use(func))

    async def close(self) -> None:
        """Close once every earlier call has finished with the connection."""

        def close(conn: sqlite3.Connection) -> None:
            self._conn = None
            conn.close()

        with anyio.CancelScope(shield=True):
            await self.call(close)
