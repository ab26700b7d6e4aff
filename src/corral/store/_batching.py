"""Appends gathered into batches, each written by one blocking call in a worker thread.

What every batching backend promises (see `CommitStore.enqueue`): appends land
in the order handed over; once a batch fails as a whole, every later append
fails too (a history never has a gap); an append is acknowledged only after
its batch's write returned.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

import anyio

from .._errors import StoreError

R = TypeVar("R")

#: Writes a batch of requests; returns one error (or None) per request, in order.
WriteBatch = Callable[[list[R]], list[BaseException | None]]


class Batch(Generic[R]):
    __slots__ = ("requests", "done", "errors", "failure")

    def __init__(self) -> None:
        self.requests: list[R] = []
        self.done = anyio.Event()
        self.errors: list[BaseException | None] = []  # one per request, once written
        self.failure: BaseException | None = None  # set when the batch failed as a whole

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


class Slot(Generic[R]):
    """One append's place in a batch: durable when the batch has been written."""

    __slots__ = ("batch", "index")

    def __init__(self, batch: Batch[R], index: int) -> None:
        self.batch, self.index = batch, index

    def done(self) -> bool:
        return self.batch.done.is_set()

    async def wait(self) -> None:
        if not self.batch.done.is_set():
            await self.batch.done.wait()
        self.check()

    def check(self) -> None:
        error = self.batch.errors[self.index]
        if error is not None:
            raise error


#: Writes a batch (on a thread of the backend's choosing) and records its outcome
#: on it with `Batch.record`.
RunBatch = Callable[[Batch[R]], Awaitable[None]]


class BatchQueue(Generic[R]):
    """The next batch, the batches being written, and whether one failed.

    Several flush loops (one per user of an open store) may run at once: they
    share the queue, so whichever is awake writes the next batch.
    """

    def __init__(self, owner: str, run: RunBatch[R]):
        self.owner = owner
        self._run = run
        self.reset()

    def reset(self) -> None:
        self._batch: Batch[R] = Batch()
        self._inflight: set[Batch[R]] = set()
        self._wakeup = anyio.Event()
        # Set when a whole batch failed: nothing handed over after it may land, or a
        # history could have a gap (a trial's evaluation without its lost terminal).
        self.failed: BaseException | None = None

    def put(self, request: R) -> Slot[R]:
        batch = self._batch
        batch.requests.append(request)
        self._wakeup.set()
        return Slot(batch, len(batch.requests) - 1)

    async def flush_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            if not self._batch.requests:  # another user's loop took it
                if self._wakeup.is_set():
                    self._wakeup = anyio.Event()
                continue
            await self._write_next()

    async def drain(self) -> None:
        """Write what was handed over, even after a cancel: only a kill loses appends
        nobody was told had landed. Call shielded."""
        for batch in list(self._inflight):
            await batch.done.wait()
        if self._batch.requests and self.failed is None:
            await self._write_next()

    async def settle(self) -> None:
        """Wait until every append handed over so far has landed or failed, so a
        reader sees them (even one whose caller was cancelled while waiting)."""
        for batch in [*self._inflight, self._batch]:
            if batch.requests:
                await batch.done.wait()

    async def _write_next(self) -> None:
        batch, self._batch = self._batch, Batch()
        self._inflight.add(batch)
        self._wakeup = anyio.Event()
        try:
            if self.failed is not None:  # appends land in order: none after a lost one
                raise StoreError(f"{self.owner}: an earlier batch failed: {self.failed}")
            # Shielded: a batch taken off the queue is written, even when the run is
            # cancelled before its thread starts (a cancel never drops an append).
            with anyio.CancelScope(shield=True):
                await self._run(batch)
            if batch.failure is not None:
                raise batch.failure
        except BaseException as exc:
            if not batch.errors:  # it never reached the database: nobody may think it landed
                batch.fail(
                    exc
                    if isinstance(exc, StoreError)
                    else StoreError(f"{self.owner}: append abandoned: {exc!r}")
                )
            if batch.failure is not None and self.failed is None:
                self.failed = batch.failure
            raise
        finally:
            self._inflight.discard(batch)
            batch.done.set()
