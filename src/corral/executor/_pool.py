"""The worker pool: one task per job running at once, reused rather than respawned.

The one implementation of running jobs in tasks, used in this process
(`LocalExecutor`, whose run's `Execution` it is) and on each Ray host. A worker
that has run its job waits its last wait (a lagging store holds it, and with it
its slot) before its result is delivered, so whatever that result frees never
needs a new task while this one is about to be free: live tasks stay within the
limits, not the number of jobs. A job submitted while a worker delivers goes to
that worker; the others to an idle worker, and only when none is idle to a new
task.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Generic, TypeVar

import anyio.abc
import anyio.lowlevel

from ..runtime._acks import Acks
from ..runtime._handoff import Handoff, handoff_maker

if TYPE_CHECKING:
    from .._concurrency import ScopeStatistics

J = TypeVar("J")
R = TypeVar("R")

#: Workers whose jobs never wait otherwise yield at every so-many-th job end (counted
#: across the pool).
_YIELD_EVERY = 16


class WorkerPool(Generic[J, R]):
    """Runs each submitted job with ``run`` in a worker task of the task group given to
    `start`, and hands its result to ``deliver`` (synchronously, on that task, as a
    batch of one: the run loop's `Deliver`)."""

    def __init__(
        self,
        run: Callable[[J], Awaitable[R]],
        deliver: Callable[[Sequence[R]], None],
        acks: Acks,
    ) -> None:
        self._run = run
        self._deliver = deliver
        self._acks = acks
        self._tg: anyio.abc.TaskGroup | None = None
        self._idle: list[Handoff[J]] = []  # workers waiting for a job
        #: A worker is delivering: the next job submitted is its own (see `_work`).
        self._delivering = False
        self._kept: J | None = None
        #: The delivering worker yields before it goes on with its kept job: the other
        #: jobs its result admits are handed out after that yield, as they were when
        #: it yielded before delivering (see `_work`).
        self._yielding = False
        self._after_yield: list[J] = []
        #: Tasks owed a turn of the loop (a job handed to a worker, idle or new; a
        #: worker's yield), and how many of those have had it (the job started, the
        #: yield returned), counted since the pool was made. A worker whose job ends
        #: with fewer paid than were owed when the job started takes it that the job
        #: never let the loop turn (see `_work`). By count: on trio, whose batches run
        #: in either order, a later task paid can stand for an earlier one still
        #: waiting in the batch, which then runs at the worker's next wait or yield.
        self._owed = 0
        self._paid = 0
        self._closing = False
        self._ends = 0  # jobs finished (to yield now and then)
        #: Worker tasks started (they end only when the pool closes).
        self.workers = 0
        #: Jobs submitted whose result has not been delivered yet.
        self.busy = 0
        #: Jobs a worker held when the run was cancelled, which never ran (`dropped`).
        self._dropped: list[J] = []

    def start(self, tg: anyio.abc.TaskGroup) -> None:
        self._tg = tg
        # The event loop's backend, found once: anyio's module-level functions look it
        # up on every call, which costs more than what they do (a worker idles and
        # ends a job once per job).
        backend = anyio.lowlevel.current_token().backend_class
        self._new_handoff: Callable[[], Handoff[J]] = handoff_maker()
        self._checkpoint = backend.checkpoint
        self._checkpoint_if_cancelled = backend.checkpoint_if_cancelled
        self._may_be_cancelled = _cancel_test(tg.cancel_scope)

    def submit(self, job: J) -> None:
        self.submit_all((job,))

    def submit_all(self, jobs: Sequence[J]) -> None:
        """Run ``jobs`` (one admission's; perhaps none): each to the delivering worker,
        an idle one, or a new task."""
        for job in jobs:
            self.busy += 1
            if self._delivering:
                if self._kept is None:
                    self._kept = job
                    continue
                if self._yielding:
                    self._after_yield.append(job)
                    continue
            self._hand_out(job)

    def _hand_out(self, job: J) -> None:
        """``job`` (counted as submitted) to an idle worker, or a new task."""
        self._owed += 1
        if self._idle:
            self._idle.pop().hand(job)
        else:
            assert self._tg is not None, "WorkerPool.submit before start"
            self.workers += 1
            self._tg.start_soon(self._work, job)

    def close(self) -> None:
        """No more jobs: every idle worker ends, and the others once they are idle."""
        self._closing = True
        while self._idle:
            self._idle.pop().hand(None)

    def dropped(self) -> Sequence[J]:
        """The jobs a delivery handed to a worker just as the run was cancelled: they
        never ran (the run lands what a rate-limited trial's job carried)."""
        return self._dropped

    def scope_statistics(self) -> Mapping[str, ScopeStatistics]:
        """No scopes elsewhere: the named scopes its jobs use are this process's own."""
        return {}

    async def _work(self, first: J) -> None:
        job: J | None = first
        self._paid += 1
        run, deliver, acks = self._run, self._deliver, self._acks
        idle: Handoff[J] | None = None
        while job is not None:
            owed = self._owed
            result = await run(job)
            # The worker's last wait before its result is delivered (and its slot
            # given back). A store that lags holds the worker here, slot and all,
            # until it has caught up: nothing new starts in the meantime, rather than
            # new workers while the finished ones wait.
            waited = False
            if acks.settle and acks.waiting:
                # What the job recorded decides what may start next (its cost, against
                # a run_cost_limit): its result waits until that is durable and counted
                # (first: a full backlog's room is half of it, which may hold the job's
                # own costly terminal still).
                await acks.settled()
                waited = True
            if acks.full:
                await acks.room()
                waited = True
            # Otherwise, should it go on with a job its result admits, the worker
            # yields first now and then, and whenever its job never let the loop turn
            # (a job handed out, or another worker's yield, from before it started
            # still waits): jobs whose agents never wait would keep it running (each
            # end starting the next at once) and starve every other task (the display,
            # the timer, the evaluations handed out and their results). A job that
            # waited (a model call) let them all run: its end costs no turn of the
            # loop. Nor does the end of a job no job follows (an evaluation's, mostly):
            # the worker then waits for its next one.
            yields = False
            if not waited:
                self._ends += 1
                yields = not (self._ends % _YIELD_EVERY and self._paid >= owed)
            self.busy -= 1
            self._delivering = True
            # The result is delivered before the yield (what it frees is counted at
            # once), and the jobs it admits beside the worker's own are handed out
            # after it: they run in the order they did when it yielded first.
            self._yielding = yields
            try:
                deliver((result,))
            finally:
                self._delivering = self._yielding = False
            job, self._kept = self._kept, None
            if yields:
                later: Sequence[J] = ()
                if self._after_yield:  # this worker's own (others may add theirs next)
                    later, self._after_yield = self._after_yield, []
                if job is not None:
                    self._owed += 1
                    try:
                        await self._checkpoint()
                    except BaseException:  # the run is cancelled: they never run
                        self._dropped += (job, *later)
                        raise
                    finally:
                        self._paid += 1
                for held in later:  # counted as they were submitted
                    self._hand_out(held)
            elif job is not None and not waited and self._may_be_cancelled():
                try:
                    await self._checkpoint_if_cancelled()  # a cancelled run stops
                except BaseException:
                    self._dropped.append(job)
                    raise
            if job is not None:
                continue
            if self._closing:
                return
            if idle is None:
                idle = self._new_handoff()  # the worker's, reused at each wait
            self._idle.append(idle)
            job = await idle.wait()
            if job is not None:
                self._paid += 1


def _cancel_test(scope: anyio.CancelScope) -> Callable[[], bool]:
    """Whether the pool's workers, in ``scope`` (its task group's), may be cancelled: a
    worker that goes on with a job asks the backend (``checkpoint_if_cancelled``) only
    then. On asyncio: whether ``scope`` or one around it, short of a shielded one, was
    cancelled, the walk anyio's check makes up from the running task's scope (a worker's
    own, its task handle's since anyio 4.14, is never cancelled: the pool keeps no
    handle), here without its dozen Python calls a job (the task found, its state looked
    up in a weak dictionary, two properties a scope): about 1 % of a trial's
    instructions. It reads the scopes' fields (as anyio's check does their parents);
    where they are not found (trio, whose check is cheap), always."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio
        return _always
    from anyio._backends._asyncio import CancelScope

    fields = ("_cancel_called", "_shield", "_parent_scope")
    if not (isinstance(scope, CancelScope) and all(hasattr(scope, f) for f in fields)):
        return _always
    top: CancelScope = scope

    def cancelled() -> bool:
        at: CancelScope | None = top
        while at is not None:
            if at._cancel_called:
                return True
            if at._shield:
                return False
            at = at._parent_scope
        return False

    return cancelled


def _always() -> bool:
    return True
