"""The run loop: asks admission what may start, submits exactly that, reacts to results.

Admission stays here, so the limits are exact whatever runs the work: each
admitted execution or evaluation becomes a job submitted to the run's
executor (`LocalExecutor`'s worker tasks, `RayExecutor`'s hosts), and the
loop reacts to the typed results it delivers. Beside them: at most one task
recording the trials that cannot run (unreachable, or their task's line
unreadable), one timer for rate-limited trials, and the run's
acknowledgements. Live tasks scale with the limits, not with the number of
trials.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc

from .._budget import NO_BUDGET, Budget
from .._concurrency import ConcurrencyScopes
from .._errors import CorralError, unwrap_single
from .._records import record_of
from .._types import (
    EVALUATED_STATUSES,
    NO_USAGE,
    BenchmarkTaskMetadata,
    Commit,
    TrialRecord,
    TrialStatus,
)
from ..executor._protocol import RunContext
from ..history import TerminalPayload, encode, terminal
from ..runtime._acks import Acks, Notify
from ..runtime._jobs import (
    EvalJob,
    Evaluated,
    Executed,
    Job,
    Postponed,
    Previous,
    Result,
    TrialJob,
    reopen_marker,
)
from ..runtime._retry import error_fields
from ..runtime._trial import CANCEL_GRACE, land_deferred
from ..store._protocol import CommitStore, TrialKey
from ._admission import Admission, Start, StartKind, Statistics
from ._handoffs import Handoffs
from ._limits import Limits
from ._plan import RunPlan
from ._resume import Resume
from ._stops import StopRules

if TYPE_CHECKING:
    from ..executor._protocol import Execution, Executor, Work
    from ..report._spool import RecordSpool


_NO_PREVIOUS: tuple[Previous | None, int | None] = (None, None)


class RunLoop:
    def __init__(
        self,
        *,
        plan: RunPlan,
        limits: Limits,
        eval_keys: list[str],
        work: Work,
        store: CommitStore,
        executor: Executor,
        notify: Notify | None,
        resume: Resume | None = None,
        critical_path: bool = True,
        error_budget: int | None = None,
        budget: Budget = NO_BUDGET,
        run_cost_limit: float | None = None,
        spool: RecordSpool | None = None,
        scopes: ConcurrencyScopes | None = None,
    ) -> None:
        self.benchmark_id = work.benchmark_id
        if scopes is None:  # the run's named scopes (its executor's workers use them)
            scopes = ConcurrencyScopes()
        #: Each finished trial's record for the report file (None: no file is written),
        #: of the trials this run starts afresh (see `RecordSpool`).
        self._spool = spool
        self.plan = plan
        self.store = store
        #: The run-wide per-trial budget (a task's own limits override it).
        self.budget = budget
        resumed = resume if resume is not None else Resume(plan)
        self.resumed = resumed.finished
        #: The records of the trials earlier runs finished (for observers, read at
        #: ``on_run_start``; this run's are not kept: the report reads the store's heads).
        self.records = resumed.records
        self._partial = resumed.partial
        self._heads = resumed.heads
        self._pending_evals = resumed.pending_evals
        self._earlier_terminals = resumed.earlier_terminals
        self._reopened = resumed.reopen
        #: Trials an earlier attempt left usage to (continued, or reopened): not spooled.
        self._carried = frozenset(resumed.partial) | resumed.reopen.keys() if spool else ()
        self._handoffs = Handoffs(plan, resumed)
        #: Each task's id as written (what its scorer is told).
        self._names = plan.output_names or plan.task_ids
        #: A streamed plan's metadata of the trials running or awaiting evaluation.
        self._streamed = type(plan.metadata) is not tuple
        self._metas: dict[tuple[int, int], BenchmarkTaskMetadata] = {}
        self.admission = Admission(
            plan,
            limits,
            eval_keys,
            phases=resumed.phases,
            statuses=resumed.statuses,
            critical_path=critical_path,
        )
        self.rules = StopRules(
            self.admission.stop,
            error_budget=error_budget,
            run_cost_limit=run_cost_limit,
            spent=resumed.cost,
        )
        self.acks = Acks(self.rules.counting_cost(notify), work.max_backlog)
        # The cost a job recorded is counted once durable: its result (which frees its
        # slot) waits for that, so no trial starts on a spend not yet counted.
        self.acks.settle = run_cost_limit is not None
        self.rules.check_cost()
        # Trials that cannot run, to record: unreachable (a start) or unreadable.
        self._unreachable: deque[Start | tuple[int, int, CorralError]] = deque()
        self._recording = False
        self._tg: anyio.abc.TaskGroup | None = None
        # Trials waiting out a rate limit: one timer task serves them all.
        self._deferred: dict[tuple[int, int], TrialJob] = {}
        self._timers: list[tuple[float, int, int]] = []
        self._timer_changed = anyio.Event()
        self._timing = False
        self._closed = False
        #: Runs the admitted work (in this process, on Ray hosts, ...).
        self.execution: Execution = executor.start(
            RunContext(work, store, self.acks, self._react, self.records.evaluation, scopes)
        )

    @property
    def stopped(self) -> str | None:
        """Why the run stopped before every trial finished, if it did."""
        return self.rules.stopped

    def statistics(self) -> Statistics:
        return self.admission.statistics()

    def recorded_cost(self) -> float:
        """The cost every run of the benchmark recorded so far (durable commits)."""
        return self.rules.spent

    async def run(self) -> None:
        try:
            with unwrap_single():
                async with anyio.create_task_group() as outer:
                    # Cancelled, it tells what lands while the trials stop (one grace).
                    outer.start_soon(self.acks.run, CANCEL_GRACE)
                    try:
                        with unwrap_single():
                            async with anyio.create_task_group() as tg:
                                self._tg = tg
                                self.execution.start(tg)
                                self._admit()
                    finally:
                        self.acks.close()  # the run returns once everything is acknowledged
        except anyio.get_cancelled_exc_class():
            # Cancelled: the trials waiting out a rate limit keep what they carry, all
            # within one more grace (a Ctrl-C amid many deferred trials still stops
            # promptly): the trials' and the acks' grace run side by side before it.
            with anyio.CancelScope(shield=True, deadline=anyio.current_time() + CANCEL_GRACE):
                for (t, r), job in self._deferred.items():
                    await land_deferred(job, self._key(t, r), self.store, self.acks)
                # And those admitted from there just as the run was cancelled, which a
                # worker held and never ran.
                for held in self.execution.dropped():
                    if isinstance(held, TrialJob) and held.deferrals:
                        await land_deferred(held, self._key(held.t, held.r), self.store, self.acks)
            raise
        if (stalled := self._stalled()) is not None:  # pragma: no cover
            raise stalled

    def _stalled(self) -> RuntimeError | None:
        """Trials remain, yet nothing runs, waits out a rate limit or records: a
        scheduler bug, never input. Raised rather than waited on forever."""
        if self.admission.complete or self._timing or self._recording or self.execution.busy:
            return None
        return RuntimeError(
            f"scheduler stalled with {self.admission.statistics()} (please report this)"
        )

    def _admit(self) -> None:
        """Submit whatever admission allows now; close the execution once all is done."""
        admission = self.admission
        jobs: list[Job] = []
        evaluations: list[Job] = []
        for start in admission.next_starts():
            kind, t, r, _ = start
            if kind == StartKind.EXECUTE:
                job = self._job(t, r)
                if job is not None:
                    jobs.append(job)
            elif kind == StartKind.EVALUATE:
                evaluations.append(self._eval_job(t, r))
            else:
                self._unreachable.append(start)
        # A worker that delivers a result goes on with the first job submitted at
        # once; the others wait for a worker to wake. Trials first: a trial holds its
        # execution slot from its admission, and execution slots are what bounds a run
        # (a trial's end admits its evaluation and the next trial together). But when
        # an evaluation may stop the run (fail_on_error, run_cost_limit) it goes
        # first: behind trials whose agents never wait, it would start only when the
        # worker yields, and trials the rule would have held back would run.
        if self.rules.heed_evaluations:
            jobs[:0] = evaluations
        else:
            jobs.extend(evaluations)
        if self._unreachable and not self._recording:
            self._recording = True
            self._spawn(self._record_unrun)
        execution = self.execution
        execution.submit_all(jobs)
        if execution.busy:
            return
        if admission.complete:
            if not self._closed:
                self._closed = True
                execution.close()
        elif (stalled := self._stalled()) is not None:  # pragma: no cover
            raise stalled

    def _job(self, t: int, r: int) -> TrialJob | None:
        """Trial (t, r)'s job (None: its task's line cannot be read; recorded apart)."""
        if self._deferred:
            job = self._deferred.pop((t, r), None)
            if job is not None:
                return job
        try:
            # A streamed task's line is read (and checked) here.
            meta, inputs = self._handoffs.trial_inputs(t, r)
        except CorralError as exc:
            self._unreachable.append((t, r, exc))
            return None
        if self._streamed:  # kept for its scorer: the line is not read again
            self._metas[(t, r)] = meta
        previous, reload = (
            self._handoffs.previous_of(t, r, self.admission.phase)
            if self._handoffs.reflective
            else _NO_PREVIOUS
        )
        return TrialJob(
            t,
            r,
            self.plan.task_ids[t],
            meta,
            inputs,
            previous,
            reload,
            may_have_history=(t, r) in self._partial,
            budget=self.budget.under(meta),
            head=self._heads.pop((t, r), 0) if self._heads else 0,
            facts=(self._names[t], meta),
            reopen=self._reopened.get((t, r)) if self._reopened else None,
        )

    def _eval_job(self, t: int, r: int) -> EvalJob:
        """Trial (t, r)'s evaluation, with what its scorer is told of the task."""
        record, seq = self._pending_evals.pop((t, r))
        meta = self._metas.pop((t, r), None) if self._metas else None
        if meta is None:  # a tuple's, or a trial an earlier run ended: read here
            meta = self.plan.metadata[t]
        facts = (self._names[t], meta)
        earlier = self._earlier_terminals.pop((t, r), None) if self._earlier_terminals else None
        return EvalJob(
            t,
            r,
            self.plan.task_ids[t],
            meta.environment_id,
            record,
            seq,
            facts=facts,
            terminal_seq=earlier,
        )

    def _spawn(self, fn: Any, *args: Any) -> None:
        assert self._tg is not None
        self._tg.start_soon(fn, *args)

    def _react(self, results: Sequence[Result]) -> None:
        """The executor's results: each trial's end (or deferral), each evaluation's."""
        for result in results:
            if type(result) is Executed:
                self._executed(result)
            elif type(result) is Evaluated:
                self._evaluated(result)
            else:
                assert type(result) is Postponed
                self._postponed(result)
        self._admit()

    def _executed(self, result: Executed) -> None:
        t, r, status = result.t, result.r, result.status
        if self._partial:
            self._partial.discard((t, r))
        if status == TrialStatus.COMPLETED and self.plan.children[t]:
            self._handoffs.output(t, r, result.output)
        if status in EVALUATED_STATUSES:
            self._pending_evals[(t, r)] = (result.record, result.next_seq)
        else:
            if self._metas:
                self._metas.pop((t, r), None)
            assert result.record is not None
            self._remember(t, result.record)
            if self._spool is not None and (t, r) not in self._carried:
                self._spool.add(t, result.record)
        self.admission.execution_ended(t, r, status)
        if status == TrialStatus.ERROR:
            self.rules.count_error()

    def _postponed(self, result: Postponed) -> None:
        """A rate limit deferred the trial: it goes on (the same job) later."""
        job = result.job
        t, r = job.t, job.r
        self._partial.discard((t, r))
        self._deferred[(t, r)] = job
        self.admission.rate_limited(t)
        self.admission.defer(t, r)
        self._wake_at(anyio.current_time() + result.deferred.delay, t, r)

    def _evaluated(self, result: Evaluated) -> None:
        t, record = result.t, result.record
        self._remember(t, record, result.state)
        if self._spool is not None and (t, result.r) not in self._carried:
            self._spool.add(t, record)
        self.admission.evaluation_ended(t, result.r)
        if record.evaluation_error is not None:
            self.rules.count_error()

    def _remember(self, t: int, record: TrialRecord, state: Any = None) -> None:
        """Keep what reflective sessions need of the trial (the report reads the store)."""
        if self._handoffs.reflective:
            self._handoffs.finished(t, record, state)

    def _wake_at(self, when: float, t: int, r: int) -> None:
        heapq.heappush(self._timers, (when, t, r))
        self._timer_changed.set()
        if not self._timing and self._tg is not None:
            self._timing = True
            self._spawn(self._timer_loop)

    async def _timer_loop(self) -> None:
        try:
            while self._timers:
                when, t, r = self._timers[0]
                if when <= anyio.current_time():
                    heapq.heappop(self._timers)
                    self.admission.resume_deferred(t, r)
                    self._admit()
                    continue
                self._timer_changed = anyio.Event()
                with anyio.move_on_after(when - anyio.current_time()):
                    await self._timer_changed.wait()
        finally:
            self._timing = False
        if (stalled := self._stalled()) is not None:  # pragma: no cover
            raise stalled

    def _key(self, t: int, r: int) -> TrialKey:
        return TrialKey(self.benchmark_id, self.plan.task_ids[t], r)

    async def _record_unrun(self) -> None:
        """Record the trials that cannot run, one by one (one task at most)."""
        try:
            while self._unreachable:
                due = self._unreachable.popleft()
                if isinstance(due, Start):  # (a named tuple: asked first)
                    await self._record_unreachable(due)
                else:
                    t, r, exc = due
                    record = await self._record_unreadable(t, r, exc)
                    self._remember(t, record)
                    self.admission.execution_ended(t, r, TrialStatus.ERROR)
                    self.rules.count_error()
                self._admit()
        finally:
            self._recording = False
        if (stalled := self._stalled()) is not None:  # pragma: no cover
            raise stalled

    async def _end_unrun(self, t: int, r: int, seq: int, payload: TerminalPayload) -> Commit:
        """Write trial (t, r)'s terminal (``payload``) at ``seq``, after its reopen marker
        if it is a rerun whose marker is not in the store yet (its next sequence number
        is the marker's): the trial never started, so nothing wrote it. Returns the
        terminal, durable and heard of."""
        key = self._key(t, r)
        reopened = self._reopened.get((t, r))
        commits = [reopen_marker(seq, reopened[1])] if reopened and reopened[0] == seq else []
        commits.append(Commit(seq + len(commits), "terminal", encode(payload), time.time()))
        await self.store.enqueue(key, commits).wait()  # the runtime's own: checked
        self.acks.durable(key, commits)
        return commits[-1]

    async def _record_unreadable(self, t: int, r: int, exc: CorralError) -> TrialRecord:
        """Trial (t, r) cannot start: its task's inputs could not be read (a task file
        changed during the run). It ends ``error`` at once; no retry would help."""
        self._handoffs.drop_inputs(t, r)
        key = self._key(t, r)
        seq = 0
        if (t, r) in self._partial or (t, r) in self._reopened:
            history = await self.store.history(key)
            seq = history[-1].seq + 1 if history else 0
        payload = terminal(TrialStatus.ERROR, attempts=0, failure=error_fields(exc))
        commit = await self._end_unrun(t, r, seq, payload)
        self._partial.discard((t, r))
        self._heads.pop((t, r), None)
        return record_of(
            key.task_id,
            r,
            terminal=commit,
            evaluation=None,
            commits=1,
            started_at=commit.created_at,
            usage=NO_USAGE,
        )

    async def _record_unreachable(self, due: Start) -> None:
        t, r, p = due.task, due.round, due.cause
        self._handoffs.drop_inputs(t, r)
        parent_id = self.plan.task_ids[p]
        parent_status = self.admission.status_of(p, r)
        payload = terminal(
            TrialStatus.UNREACHABLE,
            attempts=0,
            failure={
                "error": f"parent {parent_id!r} trial {r} ended {parent_status}, "
                "with no valid output"
            },
            cause={"task_id": parent_id, "status": str(parent_status)},
        )
        key = self._key(t, r)
        # A reopened trial's history goes on at its reopen marker; a partial one (a store
        # an earlier version left: its marker written before it ran) from its head.
        reopened = self._reopened.get((t, r))
        if reopened is not None:
            seq = reopened[0]
        else:
            seq = self._heads.pop((t, r), 0) if self._heads else 0
        commit = await self._end_unrun(t, r, seq, payload)
        self._remember(
            t,
            record_of(
                key.task_id,
                r,
                terminal=commit,
                evaluation=None,
                commits=1,
                started_at=commit.created_at,
                usage=commit.usage,
            ),
        )
        self.admission.unreachable_recorded(t, r)
