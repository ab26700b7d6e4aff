"""`LocalExecutor`: the admitted work runs in worker tasks of this process (the default)."""

from __future__ import annotations

from collections.abc import Mapping

import anyio.abc

from .._concurrency import ScopeStatistics
from ..runtime._jobs import Job, Result
from ..store._protocol import CommitStore
from ._pool import WorkerPool
from ._protocol import RunContext, Work
from ._work import JobRunner


class LocalExecutor:
    """Runs trials and evaluations in this process, one worker task per job running at
    once (tasks are reused, never one per trial): the default executor."""

    def __repr__(self) -> str:
        return "LocalExecutor()"

    async def prepare(self, work: Work, store: CommitStore) -> int | None:
        return None

    def start(self, run: RunContext) -> LocalExecution:
        return LocalExecution(run)


class LocalExecution:
    """`LocalExecutor`'s run: jobs run in its worker pool, results delivered one by one
    as each worker finishes."""

    def __init__(self, run: RunContext) -> None:
        self._deliver_batch = run.deliver
        runner = JobRunner(run.work, run.store, run.acks, remote=False)
        self._pool: WorkerPool[Job, Result] = WorkerPool(runner.run, self._delivered, run.acks)
        self._busy = 0

    @property
    def busy(self) -> int:
        return self._busy

    @property
    def workers(self) -> int:
        """Worker tasks started so far."""
        return self._pool.workers

    def submit(self, job: Job) -> None:
        self._busy += 1
        self._pool.submit(job)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        self._pool.close()

    def start(self, tg: anyio.abc.TaskGroup) -> None:
        self._pool.start(tg)  # no task of its own: only the workers

    def scope_statistics(self) -> Mapping[str, ScopeStatistics]:
        return {}

    def _delivered(self, result: Result) -> None:
        self._busy -= 1
        self._deliver_batch((result,))
