"""An in-memory commit store: fast and not durable, for tests and throwaway runs."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio

from .._errors import BenchmarkBusyError, CommitConflictError
from .._json import dumps, loads
from .._types import Commit
from ..history import ConfigStream
from ._config_diff import check_same_stream
from ._decode import decode_run
from ._heads import (
    BenchmarkOverview,
    OpenFolds,
    TaskList,
    TrialHead,
    changes_head,
    checked_overview,
    head_of,
    task_list_of_config,
)
from ._protocol import (
    BenchmarkInfo,
    Pending,
    TrialKey,
    TrialSummary,
    check_handed,
    check_payloads,
)
from ._runs import RunRecord
from ._summary import SummaryBuilder


def _encoded(commit: Commit) -> Commit:
    """The commit as kept: its payload as JSON text, so later changes to the caller's
    objects cannot rewrite it (what a real store does when it writes)."""
    return Commit(commit.seq, commit.kind, dumps(commit.payload), commit.created_at, commit.usage)


def _decoded(commit: Commit) -> Commit:
    """A kept commit with a payload of its own, decoded."""
    return Commit(commit.seq, commit.kind, loads(commit.payload), commit.created_at, commit.usage)


class _Landed:
    """A memory append is durable (as durable as memory gets) at once."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error

    def done(self) -> bool:
        return True

    def check(self) -> None:
        if self.error is not None:
            raise self.error

    async def wait(self) -> None:
        self.check()


class MemoryStore:
    """Keeps every history in a dict. Appends are atomic; nothing survives the process."""

    def __init__(self) -> None:
        self._kept: dict[TrialKey, list[Commit]] = {}  # payloads as JSON text
        self._configs: dict[str, tuple[float, Mapping[str, Any]]] = {}
        self._claimed: set[str] = set()
        self._poisoned: set[TrialKey] = set()
        self._runs: dict[str, list[str]] = {}  # run records as JSON text, by benchmark
        # Each trial's head, made whenever an append changes it (`changes_head`): from
        # the fold of the trial's appends so far, else refolded from its history.
        self._heads: dict[TrialKey, TrialHead] = {}
        self._folds = OpenFolds()

    def __repr__(self) -> str:
        return f"MemoryStore({len(self._kept)} trials)"

    @property
    def _histories(self) -> dict[TrialKey, list[Commit]]:
        """Every history, decoded (for tests and debugging)."""
        return {key: [_decoded(c) for c in commits] for key, commits in self._kept.items()}

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[None]:
        yield

    @asynccontextmanager
    async def claim(self, benchmark_id: str) -> AsyncIterator[None]:
        if benchmark_id in self._claimed:
            raise BenchmarkBusyError(f"benchmark {benchmark_id!r} is already being run")
        self._claimed.add(benchmark_id)
        try:
            yield
        finally:
            self._claimed.discard(benchmark_id)

    async def register_benchmark(
        self,
        benchmark_id: str,
        config: Mapping[str, Any] | ConfigStream,
        *,
        created_at: float | None = None,
    ) -> bool:
        await anyio.lowlevel.checkpoint()
        stream = ConfigStream.of(config)
        if benchmark_id in self._configs:
            stored = self._configs[benchmark_id][1]
            check_same_stream(benchmark_id, stored, stream, lambda: stored)
            return True
        created = time.time() if created_at is None else created_at
        self._configs[benchmark_id] = (created, stream.as_dict())
        return False

    def enqueue(self, key: TrialKey, commits: Sequence[Commit]) -> Pending:
        check_handed(key, commits)
        given, commits = commits, [_encoded(c) for c in commits]
        if key in self._poisoned:
            return _Landed(CommitConflictError(f"{key}: an earlier append of this trial failed"))
        history = self._kept.setdefault(key, [])
        seqs = [c.seq for c in commits]
        if (not history or history[-1].seq < seqs[0]) and seqs == sorted(set(seqs)):
            history.extend(commits)  # the usual case: appended past the head
            # The fold sees the payloads as they were given, before any later change.
            known, head = self._folds.heads(key, given)
            if not known:
                self._refold_head(key)
            elif head is not None:
                self._heads[key] = head
            return _Landed()
        taken = {c.seq for c in history}
        if len(set(seqs)) != len(seqs) or taken.intersection(seqs):
            self._poisoned.add(key)
            return _Landed(CommitConflictError(f"{key}: sequence number {seqs} already taken"))
        history.extend(commits)
        history.sort(key=lambda c: c.seq)
        self._folds.clear()  # appended out of order: every head refolds from here on
        if changes_head(c.kind for c in commits):
            self._refold_head(key)
        return _Landed()

    def _refold_head(self, key: TrialKey) -> None:
        self._heads[key] = head_of(_summary(key, self._kept[key]))

    async def append(self, key: TrialKey, commits: Sequence[Commit]) -> None:
        check_payloads(key, commits)
        landed = self.enqueue(key, commits)
        await anyio.lowlevel.checkpoint()
        await landed.wait()

    async def history(self, key: TrialKey) -> list[Commit]:
        await anyio.lowlevel.checkpoint()
        self._poisoned.discard(key)
        return [_decoded(c) for c in self._kept.get(key, ())]

    async def checked_history(self, key: TrialKey) -> list[Commit]:
        """`history`: nothing but Corral changes a memory store's commits."""
        return await self.history(key)

    async def summaries(self, benchmark_id: str) -> list[TrialSummary]:
        return [s async for chunk in self.scan(benchmark_id) for s in chunk]

    async def scan(self, benchmark_id: str) -> AsyncIterator[list[TrialSummary]]:
        await anyio.lowlevel.checkpoint()
        yield [
            _summary(key, history)
            for key, history in list(self._kept.items())
            if key.benchmark_id == benchmark_id and history
        ]

    async def heads(self, benchmark_id: str) -> AsyncIterator[list[TrialHead]]:
        await anyio.lowlevel.checkpoint()
        found = [(k, h) for k, h in self._heads.items() if k.benchmark_id == benchmark_id]
        found.sort(key=lambda item: (item[0].task_id, item[0].trial))
        yield [head for _, head in found]

    async def finished_trials(self, benchmark_id: str, trials_per_task: int) -> int:
        await anyio.lowlevel.checkpoint()
        return sum(
            1
            for key, head in self._heads.items()
            if key.benchmark_id == benchmark_id and head.done and key.trial < trials_per_task
        )

    async def heads_written(self, benchmark_id: str) -> int:
        await anyio.lowlevel.checkpoint()
        return sum(h.next_seq for k, h in self._heads.items() if k.benchmark_id == benchmark_id)

    async def task_list(self, benchmark_id: str) -> TaskList | None:
        await anyio.lowlevel.checkpoint()
        entry = self._configs.get(benchmark_id)
        if entry is None:
            return None
        return task_list_of_config(entry[1])

    async def overview(self) -> list[BenchmarkOverview] | None:
        await anyio.lowlevel.checkpoint()
        rows = []
        for benchmark_id, (created, config) in self._configs.items():
            tasks = config.get("tasks")
            count = len(tasks) if isinstance(tasks, Mapping) else None
            rows.append((benchmark_id, float(created), config.get("trials_per_task"), count, False))
        return checked_overview(rows)

    def reader(self) -> MemoryStore:
        """This store: it has no tie to a thread or an event loop."""
        return self

    async def task_summaries(
        self, benchmark_id: str, task_ids: Sequence[str]
    ) -> list[TrialSummary]:
        await anyio.lowlevel.checkpoint()
        wanted = set(task_ids)
        found = [
            (key.task_id, key.trial, _summary(key, history))
            for key, history in list(self._kept.items())
            if key.benchmark_id == benchmark_id and key.task_id in wanted and history
        ]
        return [summary for _, _, summary in sorted(found, key=lambda item: item[:2])]

    async def benchmark_config(self, benchmark_id: str) -> Mapping[str, Any] | None:
        await anyio.lowlevel.checkpoint()
        entry = self._configs.get(benchmark_id)
        return None if entry is None else entry[1]

    async def benchmarks(self) -> list[BenchmarkInfo]:
        await anyio.lowlevel.checkpoint()
        finished: Counter[str] = Counter(
            key.benchmark_id for key, history in self._kept.items() if _finished(history)
        )
        return [
            BenchmarkInfo.of(benchmark_id, created, config, finished[benchmark_id])
            for benchmark_id, (created, config) in self._configs.items()
        ]

    async def record_run(self, benchmark_id: str, record: RunRecord) -> None:
        await anyio.lowlevel.checkpoint()
        runs, text = self._runs.setdefault(benchmark_id, []), dumps(record.to_dict())
        if text not in runs:  # a retried call (as the other stores: byte for byte)
            runs.append(text)

    async def runs(self, benchmark_id: str) -> list[RunRecord]:
        await anyio.lowlevel.checkpoint()
        return [decode_run(repr(self), benchmark_id, t) for t in self._runs.get(benchmark_id, ())]


def _summary(key: TrialKey, history: list[Commit]) -> TrialSummary:
    builder = SummaryBuilder(key.task_id, key.trial)
    for commit in history:
        # Only the payloads a summary keeps are decoded.
        ends = commit.kind in ("terminal", "evaluation")
        builder.add(_decoded(commit) if ends else commit)
    return builder.build()


def _finished(history: list[Commit]) -> bool:
    """Its latest terminal commit comes after its latest reopening (as a resume decides)."""
    for commit in reversed(history):  # kept in seq order
        if commit.kind == "terminal":
            return True
        if commit.kind == "reopen":
            return False
    return False
