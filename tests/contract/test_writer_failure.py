"""A store's writer thread after a batch failed as a whole: every later append fails
with that same error, so a run ends with one error however its tasks heard of it."""

from __future__ import annotations

import anyio
import pytest

from corral._errors import StoreError
from corral.store._batching import Batch, WriterThread

pytestmark = pytest.mark.anyio


async def test_appends_after_a_failed_batch_fail_with_its_error() -> None:
    written: list[list[int]] = []

    def record(batch: Batch[int]) -> None:
        written.append(list(batch.requests))
        batch.fail(StoreError("store 's.db' cannot be written: disk full"))

    async def nothing() -> None:
        return None

    writer: WriterThread[int] = WriterThread("s.db", record)
    errors: list[str] = []
    with pytest.raises(StoreError, match="disk full"):
        async with writer.used(nothing, nothing, writes=True):
            first = writer.put(1)
            with pytest.raises(StoreError) as failed:
                await first.wait()
            errors.append(str(failed.value))
            later = writer.put(2)  # taken after the failure: never written
            with anyio.CancelScope(shield=True), pytest.raises(StoreError) as also:
                await later.wait()
            errors.append(str(also.value))
    assert written == [[1]]
    assert errors == ["store 's.db' cannot be written: disk full"] * 2
