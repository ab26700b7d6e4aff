"""`LocalExecutor`: the admitted work runs in worker tasks of this process (the default)."""

from __future__ import annotations

from collections.abc import Callable

from .._types import Evaluation
from ..runtime._acks import Acks
from ..runtime._jobs import Job, Result
from ..store._protocol import CommitStore
from ._pool import WorkerPool
from ._protocol import Deliver, Work
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

    def start(
        self,
        work: Work,
        store: CommitStore,
        acks: Acks,
        deliver: Deliver,
        evaluation: Callable[..., Evaluation],
    ) -> LocalExecution:
        runner = JobRunner(work, store, acks, remote=False, share=evaluation)
        return WorkerPool(runner.run, deliver, acks)
