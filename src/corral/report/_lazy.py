"""A task's trial records, read from the store only when asked for.

A report built from the store's trial heads knows each task's counts (finished,
passed, named scores) without its records: `LazyTrials` stands in for the list,
its length and counts at hand, its records read through a `RecordSource` when
iterated or indexed (and not kept: a huge report read through stays small).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Protocol, TypeVar, overload

import anyio

from .._types import TrialRecord
from ..history import finished_and_scored

T = TypeVar("T")
_NO_SCORES: Mapping[str, float] = MappingProxyType({})


class RecordSource(Protocol):
    """Reads a task's finished trials' records (in trial order)."""

    def task_records(self, task_id: str) -> list[TrialRecord]: ...


class LazyTrials(Sequence[TrialRecord]):
    """A task's finished trials (`TaskReport.trials`): ``len``, ``passed`` and
    ``named`` without reading anything; the records themselves read on use."""

    __slots__ = ("task_id", "_count", "passed", "named", "_source")

    def __init__(
        self,
        task_id: str,
        count: int,
        passed: int,
        named: Mapping[str, float] | None,
        source: RecordSource,
    ) -> None:
        self.task_id = task_id
        self._count = count
        self.passed = passed
        #: The task's named scores (each the mean over its trials that have it).
        self.named: Mapping[str, float] = named or _NO_SCORES
        self._source = source

    def records(self) -> list[TrialRecord]:
        """The records, read now (a list of the caller's own)."""
        if not self._count:
            return []
        return self._source.task_records(self.task_id)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> TrialRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[TrialRecord]: ...
    def __getitem__(self, index: int | slice) -> TrialRecord | list[TrialRecord]:
        return self.records()[index]

    def __iter__(self) -> Iterator[TrialRecord]:
        return iter(self.records())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyTrials | list | tuple):
            return len(self) == len(other) and list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<{self._count} trials of {self.task_id!r}, read from the store on use>"


def in_thread(job: Callable[[], T]) -> T:
    """``job()`` on a thread of its own (an event loop may run on this one): what
    reads a store synchronously from anywhere."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append((True, job()))
        except BaseException as exc:  # handed back to the caller
            out.append((False, exc))

    thread = threading.Thread(target=run, name="corral-records", daemon=True)
    thread.start()
    thread.join()
    ok, value = out[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def run_async(job: Callable[[], Any]) -> Any:
    """``anyio.run(job)`` on a thread of its own."""
    return in_thread(lambda: anyio.run(job))


class Positions:
    """Where a task stands in an order of tasks: at once where it was expected (`expect`:
    the one after the last found, when they are asked for in order), else from an index
    of every task's place, made the first time one is asked for out of order."""

    __slots__ = ("_next", "_index")

    def __init__(self) -> None:
        self._next = 0
        self._index: dict[str, int] | None = None

    def find(self, order: Sequence[str], task_id: str) -> int | None:
        start = self._next
        if start < len(order) and order[start] == task_id:
            return start
        if self._index is None:
            self._index = {t: i for i, t in enumerate(order)}
        return self._index.get(task_id)

    @property
    def indexed(self) -> bool:
        """Whether the index of every task's place was made (a task asked out of order)."""
        return self._index is not None

    def expect(self, position: int) -> None:
        """The next task asked for is likely the one at ``position``."""
        self._next = position


class StoreRecords:
    """`RecordSource` over a store: a task's records folded from its commits, read
    with the next tasks of the report (``order``) a window of about ``WINDOW``
    trials at a time, so reading a whole report costs one store read per window, not
    per task, and holds that window's records at most. ``open_reader``
    makes a store to read with on another thread (`HeadStore.reader`)."""

    WINDOW = 1024

    def __init__(
        self,
        open_reader: Callable[[], Any],
        benchmark_id: str,
        trials_per_task: int,
        order: Callable[[], Sequence[str]],
    ) -> None:
        self._open_reader = open_reader
        self._benchmark_id = benchmark_id
        self._trials_per_task = trials_per_task
        self._order = order
        # Where the next window starts when the report is read in order.
        self._positions = Positions()
        self._window: dict[str, list[TrialRecord]] = {}
        self._lock = threading.Lock()

    def task_records(self, task_id: str) -> list[TrialRecord]:
        with self._lock:
            found = self._window.pop(task_id, None)
            if found is None:
                self._window = self._read(self._following(task_id))
                found = self._window.pop(task_id, [])
            return found

    def _following(self, task_id: str) -> list[str]:
        order = self._order()
        start = self._positions.find(order, task_id)
        if start is None:
            return [task_id]
        # About WINDOW trials a read, however many trials a task has.
        end = start + max(1, self.WINDOW // self._trials_per_task)
        self._positions.expect(end)
        return list(order[start:end])

    def _read(self, task_ids: list[str]) -> dict[str, list[TrialRecord]]:
        benchmark_id, n = self._benchmark_id, self._trials_per_task

        async def read() -> dict[str, list[TrialRecord]]:
            store = self._open_reader()
            out: dict[str, list[TrialRecord]] = {task_id: [] for task_id in task_ids}
            async with store.opened():
                for s in await store.task_summaries(benchmark_id, task_ids):
                    s = s.counted()  # a rerun's earlier attempt, until the new one ends
                    if 0 <= s.trial < n and finished_and_scored(s.terminal, s.evaluation):
                        out[s.task_id].append(s.record())
            return out

        result: dict[str, list[TrialRecord]] = run_async(read)
        return result
