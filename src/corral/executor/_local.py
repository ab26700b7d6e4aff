"""`LocalExecutor`: the admitted work runs in worker tasks of this process (the default)."""

from __future__ import annotations

from ..runtime._jobs import Job, Result
from ..store._protocol import CommitStore
from ._pool import WorkerPool
from ._protocol import RunContext, Work
from ._work import JobRunner

#: `LocalExecutor`'s run: jobs run in its worker pool, results delivered one by one as
#: each worker finishes.
LocalExecution = WorkerPool[Job, Result]


class LocalExecutor:
    """Runs trials and evaluations in this process, one worker task per job running at
    once (tasks are reused, never one per trial): the default executor."""

    def __repr__(self) -> str:
        return "LocalExecutor()"

    async def prepare(self, work: Work, store: CommitStore) -> int | None:
        return None

    def start(self, run: RunContext) -> LocalExecution:
        runner = JobRunner(run.work, run.store, run.acks, remote=False, share=run.evaluation)
        return WorkerPool(runner.run, run.deliver, run.acks)
