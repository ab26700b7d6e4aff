"""Appends gathered into batches, each written by one blocking call on one long-lived
writer thread (`WriterThread`), the one a store's writes go through (SQLite's and
PostgreSQL's).

What every batching backend promises (see `CommitStore.enqueue`): appends land
in the order handed over; once a batch fails as a whole, every later append
fails too (a history never has a gap); an append is acknowledged only after
its batch's write returned.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

import anyio
import anyio.lowlevel

from .._errors import StoreError, unwrap_single

R = TypeVar("R")

#: Writes a batch of requests; returns one error (or None) per request, in order.
WriteBatch = Callable[[list[R]], list[BaseException | None]]


class Done(Protocol):
    """What a batch's waiters wait on: an `anyio.Event`, or on asyncio the
    `asyncio.Event` itself (`WriterThread.start`)."""

    def set(self) -> object: ...

    def is_set(self) -> bool: ...

    async def wait(self) -> object: ...


class Batch(Generic[R]):
    __slots__ = ("requests", "done", "landed", "errors", "failure")

    def __init__(self, done: Done | None = None) -> None:
        self.requests: list[R] = []
        self.done: Done = anyio.Event() if done is None else done
        #: ``done.is_set()``, read without its two calls (every append checks it):
        #: set with it, on the event loop's thread (`finish`).
        self.landed = False
        self.errors: list[BaseException | None] = []  # one per request, once written
        self.failure: BaseException | None = None  # set when the batch failed as a whole

    def finish(self) -> None:
        """Wake the batch's waiters (on the event loop's thread)."""
        self.landed = True
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self.failure = error
        self.errors = [error] * len(self.requests)

    def record(self, write: WriteBatch[R], translate: Callable[[Exception], StoreError]) -> None:
        """Write the batch and record its outcome, on the thread that writes it: a
        caller cancelled with ``Task.cancel()`` that returns early still leaves the
        outcome true for every appender."""
        try:
            self.errors = write(self.requests)
        except StoreError as exc:
            self.fail(exc)
        except Exception as exc:
            self.fail(translate(exc))


class Slot(NamedTuple, Generic[R]):
    """One append's place in a batch: durable when the batch has been written. A tuple,
    made by `WriterThread.put` with ``tuple.__new__`` (`_new_slot`): every append makes
    one, and a class's own constructor is a Python call more."""

    batch: Batch[R]
    at: int  # its place in the batch (`index` is a tuple's method)

    def done(self) -> bool:
        return self.batch.landed

    async def wait(self) -> None:
        batch = self.batch
        if not batch.landed:
            await batch.done.wait()
        error = batch.errors[self.at]  # `check`, inlined: every append waits here
        if error is not None:
            raise error

    def check(self) -> None:
        error = self.batch.errors[self.at]
        if error is not None:
            raise error


_new_slot = tuple.__new__

#: Writes a batch and records its outcome on it (`Batch.record`), on the caller's
#: thread (the writer thread of a `WriterThread`).
RecordBatch = Callable[[Batch[R]], None]


async def surely(wait: Callable[[], Awaitable[None]]) -> None:
    """``await wait()`` to its end, shielded, and again each time asyncio's
    ``Task.cancel()`` (which no cancel scope stops) interrupts it; then the first such
    cancellation is raised. What ends a store's use or a claim must know the appends
    handed over have landed (or failed), however often the caller is cancelled."""
    interrupted: asyncio.CancelledError | None = None
    while True:
        try:
            with anyio.CancelScope(shield=True):
                await wait()
        except asyncio.CancelledError as exc:  # Task.cancel(): it still has to end
            interrupted = interrupted or exc
            continue
        break
    if interrupted is not None:
        raise interrupted


class WriterThread(Generic[R]):
    """The next batch and one long-lived thread that writes batches one after another.

    The same promises as `BatchQueue`, with less latency: the thread takes the next
    batch as soon as the one before has been written (no round trip through the event
    loop, no worker thread handed each batch), and wakes the waiters of a batch with
    one call onto the event loop. Appends are taken in the order handed over; once a
    batch fails as a whole, every later one fails without being written; a batch
    taken is written whatever happens to the tasks waiting on it (only the thread
    writes, and it ends only once every append handed over has been written).
    """

    def __init__(self, owner: str, record: RecordBatch[R]):
        self.owner = owner
        self._record = record
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._batch: Batch[R] | None = None  # the next batch, made by the first append
        #: What a batch's waiters wait on (`start` picks it for the event loop).
        self._done: Callable[[], Done] = anyio.Event
        self._taken: Batch[R] | None = None  # the latest batch the thread took
        self._stopping = False
        self._running = False
        self._stopped: anyio.Event | None = None
        self._failure: anyio.Event | None = None  # set once `failed` is
        self._thread: threading.Thread | None = None
        self.failed: BaseException | None = None
        self._users = 0  # runs (or commands) holding the store open
        self._open_lock: anyio.Lock | None = None

    @asynccontextmanager
    async def used(
        self,
        connect: Callable[[], Awaitable[None]],
        disconnect: Callable[[], Awaitable[None]],
        *,
        writes: bool,
    ) -> AsyncIterator[None]:
        """A store open for as long as the block runs; several runs may share it.

        The first user connects (and, with ``writes``, starts the thread), and the last
        one out stops it and disconnects; every user's appends go to the one thread, so
        a user that leaves never strands another's appends. A batch that failed as a
        whole ends every user's use."""
        if self._open_lock is None:
            self._open_lock = anyio.Lock()
        async with self._open_lock:
            if not self._users:
                await connect()
                if writes:
                    self.start()
            self._users += 1
        try:
            with unwrap_single():
                async with anyio.create_task_group() as tg:
                    if writes:
                        tg.start_soon(self.watch)
                    try:
                        yield
                        self.check()
                    finally:
                        tg.cancel_scope.cancel()
        finally:
            # What was handed over is written even when the run was cancelled (Ctrl-C,
            # or Task.cancel() again and again): only a kill loses appends nobody was
            # told had landed.
            try:
                await surely(self.settle)
            finally:  # even when that last batch failed: the last user out closes
                with anyio.CancelScope(shield=True):
                    async with self._open_lock:
                        self._users -= 1
                        if not self._users:
                            await self.stop()
                            await disconnect()

    def start(self) -> None:
        """Start the thread (on the event loop whose tasks wait on its batches)."""
        native: Any = anyio.lowlevel.current_token().native_token
        call = getattr(native, "call_soon_threadsafe", None)
        soon = call if call is not None else native.run_sync_soon
        # On asyncio, a batch's waiters wait on an `asyncio.Event` itself: anyio's
        # wraps it in a coroutine and a call more for every wait (each append's).
        self._done = asyncio.Event if call is not None else anyio.Event
        self._batch = self._taken = None
        self._stopping = False
        self._running = True
        self.failed = None
        stopped = self._stopped = anyio.Event()
        self._failure = anyio.Event()
        self._thread = threading.Thread(
            target=self._main, args=(soon, stopped), name=f"corral writer {self.owner}", daemon=True
        )
        self._thread.start()

    async def watch(self) -> None:
        """Raise the failure of the first batch that fails as a whole (a task of each
        user of the store: the failure ends its use, appends nobody waits for too)."""
        assert self._failure is not None
        await self._failure.wait()
        assert self.failed is not None
        raise self.failed

    def check(self) -> None:
        """Raise the failure of a batch that failed as a whole, if one did."""
        if self.failed is not None:
            raise self.failed

    def put(self, request: R) -> Slot[R]:
        with self._lock:
            if not self._running:
                raise StoreError(f"{self.owner} is not open")
            batch = self._batch
            if batch is None:
                batch = self._batch = Batch(self._done())
                self._wake.notify()
            requests = batch.requests
            requests.append(request)
            return _new_slot(Slot, (batch, len(requests) - 1))

    async def settle(self) -> None:
        """Wait until every append handed over so far has landed or failed (batches
        are done in the order taken: the latest ones say so for every earlier one)."""
        with self._lock:
            batches = (self._taken, self._batch)
        for batch in batches:
            if batch is not None:
                await batch.done.wait()

    async def stop(self) -> None:
        """Write what was handed over, then end the thread (call shielded)."""
        with self._lock:
            if not self._running:
                return
            self._stopping = True
            self._wake.notify()
        assert self._stopped is not None and self._thread is not None
        await self._stopped.wait()
        self._thread.join()  # it has said its last: no thread outlives the store's use

    def _main(self, call: Callable[[Callable[[], object]], object], stopped: anyio.Event) -> None:
        def soon(func: Callable[[], object]) -> None:
            try:
                call(func)
            except Exception:  # the event loop has closed: nobody waits any more
                pass

        try:
            while True:
                with self._lock:
                    while self._batch is None and not self._stopping:
                        self._wake.wait()
                    batch = self._batch
                    if batch is None:  # stopping, and nothing left to write
                        self._running = False
                        break
                    self._batch, self._taken = None, batch
                failed = self.failed
                try:
                    self._write(batch)
                finally:
                    if not batch.errors:  # the thread itself failed (a bug)
                        batch.fail(StoreError(f"{self.owner}: the writer thread failed"))
                        self.failed = batch.failure
                    soon(batch.finish)
                    if self.failed is not failed and self._failure is not None:
                        soon(self._failure.set)
        finally:
            with self._lock:
                self._running = False
                left, self._batch = self._batch, None
            if left is not None:  # only after a failure of the thread itself
                left.fail(StoreError(f"{self.owner}: the writer thread ended"))
                soon(left.finish)
            soon(stopped.set)

    def _write(self, batch: Batch[R]) -> None:
        if self.failed is not None:  # appends land in order: none after a lost one
            # With the first failure's own error: a run whose tasks hear of it from
            # several batches ends with one error, the cause (a full disk, say).
            batch.fail(self.failed)
            return
        try:
            self._record(batch)
        except BaseException as exc:
            if not batch.errors:  # it never reached the database: nobody may think it landed
                batch.fail(StoreError(f"{self.owner}: append abandoned: {exc!r}"))
        if batch.failure is not None:
            self.failed = batch.failure
