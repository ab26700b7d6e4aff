"""The run loop: asks admission what may start, starts exactly that, reports back.

One worker task per admitted execution or evaluation, created at admission
and never before; a worker that runs out of work waits to be handed the next
start instead of ending, so a new task is created only when every worker is
busy; a worker gives its slot back only once it is free again (a lagging store
holds it, and with it admission, until it has caught up). Beside them: at most
one task recording unreachable trials, one timer for rate-limited trials, and
the run's acknowledgements. Live tasks scale with the limits, not with the
number of trials.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel

from .._budget import NO_BUDGET, Budget
from .._errors import CorralError, unwrap_single
from .._json import DEFAULT_MAX_VALUE_BYTES
from .._protocols import Agent, Environment
from .._records import ScoringFacts, TrialTable, record_of, scoring_facts
from .._types import (
    EVALUATED_STATUSES,
    NO_USAGE,
    BenchmarkTaskMetadata,
    Commit,
    TrialRecord,
    TrialStatus,
)
from ..history import encode, terminal
from ..runtime._acks import Acks, Notify
from ..runtime._evaluate import evaluate_trial
from ..runtime._handoff import Handoff
from ..runtime._retry import RetryPolicy, error_fields
from ..runtime._trial import (
    Deferred,
    Previous,
    TrialOutcome,
    TrialPlan,
    load_previous,
    run_trial,
)
from ..store._protocol import CommitStore, TrialKey, TrialSummary
from ._admission import STATUS_CODES, Admission, Phase, Start, StartKind, Statistics
from ._limits import Limits
from ._plan import RunPlan
from ._remote import Remote


class Resume:
    """What an earlier run of the same benchmark left, folded chunk by chunk into compact form.

    ``rerun`` names statuses whose trials get a fresh attempt (each gets a reopen
    marker, see `reopen`), together with their unreachable descendants. With
    ``rescore`` (``"all"`` or ``"failed"``) nothing executes: the finished trials
    to score (all evaluated statuses, or those that did not pass) are evaluated again.
    """

    def __init__(
        self,
        plan: RunPlan,
        *,
        rerun: frozenset[TrialStatus] = frozenset(),
        rescore: str | None = None,
    ) -> None:
        n = plan.trials_per_task
        self.plan = plan
        self._rerun = rerun
        self._rescore = rescore
        self._index = {task_id: i for i, task_id in enumerate(plan.task_ids)}
        self.phases = [bytearray(n) for _ in plan.task_ids]
        self.statuses = [bytearray(n) for _ in plan.task_ids]
        self.previous: list[Previous | None] = [None] * len(plan.task_ids)
        self.outputs: dict[tuple[int, int], Any] = {}
        self.partial: set[tuple[int, int]] = set()
        #: Where this run's commits of a partial trial start (what earlier runs left).
        self.heads: dict[tuple[int, int], int] = {}
        self.pending_evals: dict[tuple[int, int], tuple[TrialRecord | None, int]] = {}
        self.finished = 0
        #: The cost every run of the benchmark recorded so far (for ``run_cost_limit``).
        self.cost = 0.0
        #: Records (without states) of the trials an earlier run finished, for the report.
        self.records = TrialTable(plan.trials_per_task)
        #: Trials to reopen: (t, r) -> (the sequence number of its marker, its last status).
        self.reopen: dict[tuple[int, int], tuple[int, TrialStatus]] = {}
        self._unreachable_seq: dict[tuple[int, int], int] = {}

    def absorb(self, summaries: Iterable[TrialSummary]) -> None:
        plan, n = self.plan, self.plan.trials_per_task
        for s in summaries:
            t = self._index.get(s.task_id)
            if t is None or not 0 <= s.trial < n:
                continue
            r = s.trial
            self.cost += s.usage.cost
            if s.terminal is None:
                self.partial.add((t, r))
                self.heads[(t, r)] = s.next_seq
                continue
            record = s.record()
            if record.status in self._rerun:
                self.reopen[(t, r)] = (s.next_seq, record.status)
                self.partial.add((t, r))
                self.heads[(t, r)] = s.next_seq + 1  # after its reopen marker
                continue
            self.statuses[t][r] = STATUS_CODES[record.status]
            if record.status == TrialStatus.UNREACHABLE:
                self._unreachable_seq[(t, r)] = s.next_seq
            if record.status == TrialStatus.COMPLETED and plan.children[t]:
                self.outputs[(t, r)] = record.output
            if record.status in EVALUATED_STATUSES and self._to_score(s, record):
                self.phases[t][r] = Phase.ENDED
                # The scorer gets the trial as it ended, not an earlier score.
                unscored = record if s.evaluation is None else s.record(scored=False)
                self.pending_evals[(t, r)] = (unscored, s.next_seq)
                continue
            self.phases[t][r] = Phase.DONE
            self.finished += 1
            self.records.add(record)
            best = self.previous[t]
            if best is None or best.trial < r:
                self.previous[t] = Previous(r, record.evaluation, record.state)

    @property
    def rescoring(self) -> bool:
        return self._rescore is not None

    def _to_score(self, summary: TrialSummary, record: TrialRecord) -> bool:
        if self._rescore is None:
            return summary.evaluation is None
        return self._rescore == "all" or not record.passed

    def settle(self) -> None:
        """After the last chunk: reopen the unreachable descendants of reopened trials
        (their parents may now give an output); with ``rescore``, nothing else runs."""
        todo = list(self.reopen)
        while todo:
            t, r = todo.pop()
            for c in self.plan.children[t]:
                seq = self._unreachable_seq.pop((c, r), None)
                if seq is None:
                    continue
                self.phases[c][r] = Phase.PENDING
                self.statuses[c][r] = 0
                self.finished -= 1
                self.records.remove(self.plan.task_ids[c], r)
                self.partial.add((c, r))
                self.reopen[(c, r)] = (seq, TrialStatus.UNREACHABLE)
                self.heads[(c, r)] = seq + 1
                todo.append((c, r))
        if self._rescore is not None:
            for phases in self.phases:
                for r, phase in enumerate(phases):
                    if phase == Phase.PENDING:  # unfinished: left for a later run
                        phases[r] = Phase.DONE
            self.partial.clear()


class RunLoop:
    def __init__(
        self,
        *,
        benchmark_id: str,
        plan: RunPlan,
        limits: Limits,
        agents: Mapping[str, Agent],
        environments: Mapping[str, Environment],
        eval_keys: list[str],
        store: CommitStore,
        policy: RetryPolicy,
        trial_timeout: float | None,
        notify: Notify,
        evaluation_timeout: float | None = None,
        resume: Resume | None = None,
        critical_path: bool = True,
        error_budget: int | None = None,
        max_backlog: int = 0,
        budget: Budget = NO_BUDGET,
        run_cost_limit: float | None = None,
        remote: Remote | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        self.benchmark_id = benchmark_id
        #: The most bytes of JSON one recorded value may take.
        self.max_value_bytes = max_value_bytes
        self.plan = plan
        self.agents = agents
        self.environments = environments
        self.store = store
        self.policy = policy
        self.trial_timeout = trial_timeout
        self.evaluation_timeout = evaluation_timeout
        #: Trial errors and failed evaluations this run may have before it stops
        #: admitting trials (``fail_on_error``); None: never stop.
        self.error_budget = error_budget
        self.errors = 0
        #: Why the run stopped before every trial finished, if it did.
        self.stopped: str | None = None
        #: The run-wide per-trial budget (a task's own limits override it).
        self.budget = budget
        resumed = resume if resume is not None else Resume(plan)
        #: Cost recorded by every run of this benchmark; at ``run_cost_limit``, admission stops.
        self.spent = resumed.cost
        self.run_cost_limit = run_cost_limit
        if run_cost_limit is not None:
            notify = self._counting_cost(notify)
        self.acks = Acks(notify, max_backlog)
        self.resumed = resumed.finished
        #: Every finished trial's record (without its state): the report's rows.
        self.records = resumed.records
        self._previous = resumed.previous
        self._partial = resumed.partial
        self._heads = resumed.heads
        self._pending_evals = resumed.pending_evals
        self._reopened = resumed.reopen
        # A parent's output waits here until every child's same round has taken it.
        self._outputs: dict[tuple[int, int], list[Any]] = {}
        for (t, r), output in resumed.outputs.items():
            waiting = sum(1 for c in plan.children[t] if resumed.phases[c][r] == Phase.PENDING)
            if waiting:
                self._outputs[(t, r)] = [output, waiting]
        self.admission = Admission(
            plan,
            limits,
            eval_keys,
            phases=resumed.phases,
            statuses=resumed.statuses,
            critical_path=critical_path,
        )
        self._check_cost()
        self._unreachable: deque[Start] = deque()
        self._recording = False
        self._tg: anyio.abc.TaskGroup | None = None
        # Trials waiting out a rate limit: one timer task serves them all.
        self._deferred_plans: dict[tuple[int, int], TrialPlan] = {}
        self._timers: list[tuple[float, int, int]] = []
        self._timer_changed = anyio.Event()
        self._timing = False
        self._idle: list[Handoff[Start]] = []  # workers waiting for a start
        self._workers = 0  # worker tasks started (they end only when the run is complete)
        self._ends = 0  # executions and evaluations the workers finished (to yield now and then)
        #: Runs the admitted work elsewhere (on Ray hosts) instead of in worker tasks.
        self.remote = remote

    def statistics(self) -> Statistics:
        return self.admission.statistics()

    def recorded_cost(self) -> float:
        """The cost every run of the benchmark recorded so far (durable commits)."""
        return self.spent

    async def run(self) -> None:
        with unwrap_single():
            async with anyio.create_task_group() as outer:
                outer.start_soon(self.acks.run)
                with unwrap_single():
                    async with anyio.create_task_group() as tg:
                        self._tg = tg
                        if self.remote is not None:
                            tg.start_soon(self.remote.run, self)
                        else:
                            self._dispatch(self._pump())
                self.acks.close()  # the run returns once everything is acknowledged
        if (stalled := self._stalled(busy=0)) is not None:  # pragma: no cover
            raise stalled

    def _stalled(self, busy: int) -> RuntimeError | None:
        """Trials remain, yet nothing runs (but ``busy`` callers), waits out a rate limit
        or records: a scheduler bug, never input. Raised rather than waited on forever."""
        if self.admission.complete or self._timing or self._recording:
            return None
        if self.remote is not None and self.remote.busy:
            return None
        if len(self._idle) + busy < self._workers:
            return None
        return RuntimeError(
            f"scheduler stalled with {self.admission.statistics()} (please report this)"
        )

    def _pump(self) -> Start | None:
        """Start what admission allows; hand one start back for the calling task to run.

        A worker that finishes a trial goes on with the next admitted one; the
        other starts go to idle workers, and only when none is idle to a new one.
        """
        keep: Start | None = None
        remote = self.remote
        for start in self.admission.next_starts():
            if start.kind == StartKind.UNREACHABLE:
                self._unreachable.append(start)
            elif remote is not None:
                remote.start(start)
            elif keep is None:
                keep = start
            else:
                self._dispatch(start)
        if self._unreachable and not self._recording:
            self._recording = True
            self._spawn(self._record_unreachable)
        if self.admission.complete:
            while self._idle:  # nothing more will come: let every idle worker end
                self._idle.pop().hand(None)
        if remote is not None:
            remote.flush()
        return keep

    def admit(self) -> None:
        """Start whatever admission allows now."""
        self._dispatch(self._pump())

    def _dispatch(self, start: Start | None) -> None:
        if start is None:
            return
        if self._idle:
            self._idle.pop().hand(start)
        else:
            self._workers += 1
            self._spawn(self._work, start)

    def _spawn(self, fn: Any, *args: Any) -> None:
        assert self._tg is not None
        self._tg.start_soon(fn, *args)

    async def _work(self, start: Start | None) -> None:
        while start is not None:
            # A start gives its slot back only after its last wait (`_finishing`), and
            # the next admission follows with no wait between: every other worker
            # holds a slot then, so a worker is created only for a slot no task has.
            if start.kind == StartKind.EXECUTE:
                await self._execute(start.task, start.round)
            else:
                await self._evaluate(start.task, start.round)
            start = self._pump()
            if start is None and not self.admission.complete:
                if (stalled := self._stalled(busy=1)) is not None:  # pragma: no cover
                    raise stalled
                idle: Handoff[Start] = Handoff()
                self._idle.append(idle)
                start = await idle.wait()

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
                    self._dispatch(self._pump())
                    continue
                self._timer_changed = anyio.Event()
                with anyio.move_on_after(when - anyio.current_time()):
                    await self._timer_changed.wait()
        finally:
            self._timing = False
        if (stalled := self._stalled(busy=0)) is not None:  # pragma: no cover
            raise stalled

    def _key(self, t: int, r: int) -> TrialKey:
        return TrialKey(self.benchmark_id, self.plan.task_ids[t], r)

    def _inputs(self, t: int, r: int) -> Mapping[str, Any]:
        meta = self.plan.metadata[t]
        parents = self.plan.parents[t]
        if not parents:
            return meta.inputs
        inputs = dict(meta.inputs)
        for p in parents:
            inputs[self.plan.output_name(p)] = self._take_output(p, r)
        return inputs

    def _take_output(self, p: int, r: int) -> Any:
        entry = self._outputs[(p, r)]
        entry[1] -= 1
        if entry[1] == 0:
            del self._outputs[(p, r)]
        return entry[0]

    def trial_inputs(self, t: int, r: int) -> tuple[BenchmarkTaskMetadata, Mapping[str, Any]]:
        """Trial (t, r)'s metadata and inputs (its parents' outputs taken); raises
        `CorralError` when a streamed task's line cannot be read (see `unreadable`)."""
        return self.plan.metadata[t], self._inputs(t, r)

    def previous_of(self, t: int, r: int) -> tuple[Previous | None, int | None]:
        """The earlier trial (t, r)'s reflective session sees, or (None, q) when it is
        trial q, which must be read from the store."""
        previous = self._previous[t]
        if previous is not None and previous.trial >= r:
            # Rounds finished out of order (a resumed run, or a later round's
            # parents ended first): this trial sees the latest *earlier* one.
            earlier = [q for q in range(r) if self.admission.phase[t][q] == Phase.DONE]
            return None, earlier[-1] if earlier else None
        return previous, None

    def deferred(self, t: int, r: int) -> Any:
        """The plan (or remote job) of a trial a rate limit deferred, or None."""
        return self._deferred_plans.pop((t, r), None)

    def may_have_history(self, t: int, r: int) -> bool:
        return (t, r) in self._partial

    def head_of(self, t: int, r: int) -> int:
        """The sequence number of this run's first commit of trial (t, r): the commits
        before it, earlier runs recorded (and counted)."""
        return self._heads.pop((t, r), 0)

    async def _execute(self, t: int, r: int) -> None:
        trial = self._deferred_plans.pop((t, r), None)
        if trial is None:
            try:
                # A streamed task's line is read (and checked) here.
                meta, inputs = self.trial_inputs(t, r)
            except CorralError as exc:
                record = await self._record_unreadable(t, r, exc)
                await self._finishing()
                self._unreadable_ended(t, r, record)
                return
            previous, reload = self.previous_of(t, r)
            if reload is not None:
                previous = await load_previous(self.store, self._key(t, r), reload)
            trial = TrialPlan(
                key=self._key(t, r),
                metadata=meta,
                agent=self.agents[meta.agent_id],
                environment=self.environments[meta.environment_id],
                inputs=inputs,
                store=self.store,
                policy=self.policy,
                trial_timeout=self.trial_timeout,
                acks=self.acks,
                previous=previous,
                may_have_history=(t, r) in self._partial,
                budget=self.budget.under(meta),
                max_value_bytes=self.max_value_bytes,
            )
        outcome = await run_trial(trial)
        await self._finishing()
        self.executed(t, r, trial, outcome)

    async def _finishing(self) -> None:
        """A worker's last wait before its execution or evaluation gives its slot back.

        A store that lags holds the worker here, slot and all, until it has caught
        up: admission starts nothing in the meantime, rather than starting new
        workers while the finished ones wait (the live tasks stay within the
        limits). Otherwise the worker yields now and then: trials whose agents
        never wait would keep it running and starve every other task (the
        display, the timer).
        """
        if self.acks.full:
            await self.acks.room()
            return
        self._ends += 1
        if self._ends % _YIELD_EVERY:
            await anyio.lowlevel.checkpoint_if_cancelled()  # a cancelled run stops here
        else:
            await anyio.lowlevel.checkpoint()

    def executed(self, t: int, r: int, trial: Any, outcome: TrialOutcome | Deferred) -> None:
        """Trial (t, r) ended (or was deferred); ``trial`` is its plan or remote job."""
        self._partial.discard((t, r))
        if isinstance(outcome, Deferred):
            # Continue later from the store's head, with the inputs it already had.
            trial.may_have_history = True
            trial.first_attempt = outcome.attempt
            trial.deferrals += 1
            self._deferred_plans[(t, r)] = trial
            self.admission.rate_limited(t)
            self.admission.defer(t, r)
            self._wake_at(anyio.current_time() + outcome.delay, t, r)
            return
        record = outcome.record
        self.ended(t, r, record.status, record.output, outcome.next_seq, record)

    def ended(
        self,
        t: int,
        r: int,
        status: TrialStatus,
        output: Any,
        next_seq: int,
        record: TrialRecord | None,
    ) -> None:
        """Trial (t, r)'s execution ended with ``status``; ``record`` may be None only for
        a status that is evaluated (a Ray host keeps the record for the evaluation)."""
        children = self.plan.children[t]
        if status == TrialStatus.COMPLETED and children:
            self._outputs[(t, r)] = [output, len(children)]
        if status in EVALUATED_STATUSES:
            self._pending_evals[(t, r)] = (record, next_seq)
        else:
            assert record is not None
            self._remember(t, record)
        self.admission.execution_ended(t, r, status)
        if status == TrialStatus.ERROR:
            self._count_error()

    async def unreadable(self, t: int, r: int, exc: CorralError) -> None:
        """Trial (t, r) cannot start: its task's inputs could not be read (a task file
        changed during the run). It ends ``error`` at once; no retry would help."""
        self._unreadable_ended(t, r, await self._record_unreadable(t, r, exc))

    async def _record_unreadable(self, t: int, r: int, exc: CorralError) -> TrialRecord:
        for p in self.plan.parents[t]:
            if (p, r) in self._outputs:
                self._take_output(p, r)
        key = self._key(t, r)
        seq = 0
        if (t, r) in self._partial or (t, r) in self._reopened:
            history = await self.store.history(key)
            seq = history[-1].seq + 1 if history else 0
        payload = terminal(TrialStatus.ERROR, attempts=0, failure=error_fields(exc))
        commit = Commit(seq, "terminal", encode(payload), time.time())
        await self.store.append(key, [commit])
        self.acks.durable(key, [commit])
        self._partial.discard((t, r))
        return record_of(
            key.task_id,
            r,
            terminal=commit,
            evaluation=None,
            commits=1,
            started_at=commit.created_at,
            usage=NO_USAGE,
        )

    def _unreadable_ended(self, t: int, r: int, record: TrialRecord) -> None:
        self._remember(t, record)
        self.admission.execution_ended(t, r, TrialStatus.ERROR)
        self._count_error()

    def to_evaluate(self, t: int, r: int) -> tuple[TrialRecord | None, int]:
        """The record to score (None: a Ray host keeps it) and the sequence number of
        its evaluation commit."""
        return self._pending_evals.pop((t, r))

    async def _evaluate(self, t: int, r: int) -> None:
        record, seq = self.to_evaluate(t, r)
        assert record is not None  # only a Ray host's trials leave it there
        meta = self.plan.light(t)
        record = await evaluate_trial(
            self.environments[meta.environment_id],
            record,
            key=self._key(t, r),
            seq=seq,
            store=self.store,
            policy=self.policy,
            acks=self.acks,
            time_limit=self.evaluation_timeout,
            max_value_bytes=self.max_value_bytes,
            facts=self.facts(t),
        )
        await self._finishing()
        self.evaluated(t, r, record, record.state)

    def facts(self, t: int) -> ScoringFacts:
        """What task t's scorer is told of it (its inputs read now, for a streamed task)."""
        return scoring_facts(self.plan.output_name(t), self.plan.metadata[t])

    def evaluated(self, t: int, r: int, record: TrialRecord, state: Any) -> None:
        """Trial (t, r)'s evaluation ended: ``record`` is its final record, ``state`` its
        final state (a Ray host sends the record without it)."""
        self._remember(t, record, state)
        self.admission.evaluation_ended(t, r)
        if record.evaluation_error is not None:
            self._count_error()

    def _count_error(self) -> None:
        self.errors += 1
        budget = self.error_budget
        if budget is not None and self.errors > budget:
            self._stop(
                f"fail_on_error: {self.errors} errors exceeded the limit of {budget}; "
                "no new trial was started after that"
            )

    def _counting_cost(self, notify: Notify) -> Notify:
        """``notify``, after adding each durable commit's cost to the run's spend."""

        def counted(key: TrialKey, commit: Commit) -> None:
            cost = commit.usage.cost
            if cost:
                self.spent += cost
                self._check_cost()
            notify(key, commit)

        return counted

    def _check_cost(self) -> None:
        limit = self.run_cost_limit
        if limit is not None and self.spent >= limit:
            self._stop(
                f"run_cost_limit: {self.spent:g} spent of {limit:g}; no new trial was started "
                "after that (run again with a higher run_cost_limit to continue)"
            )

    def _stop(self, reason: str) -> None:
        """Admit no new trial (what runs finishes); the first reason is the one reported."""
        if self.stopped is None:
            self.stopped = reason
            self.admission.stop()

    def _remember(self, t: int, record: TrialRecord, state: Any = None) -> None:
        """Keep the trial's record for the report, and the highest finished trial of each
        task (with its final state: ``state``, else the record's) for reflective sessions."""
        self.records.add(record)
        best = self._previous[t]
        if best is None or best.trial < record.trial:
            final = record.state if state is None else state
            self._previous[t] = Previous(record.trial, record.evaluation, final)

    async def _record_unreachable(self) -> None:
        try:
            while self._unreachable:
                due = self._unreachable.popleft()
                t, r, p = due.task, due.round, due.cause
                for parent in self.plan.parents[t]:
                    if (parent, r) in self._outputs:
                        self._take_output(parent, r)
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
                # A reopened trial's history goes on after its reopen marker.
                reopened = self._reopened.get((t, r))
                seq = 0 if reopened is None else reopened[0] + 1
                commit = Commit(seq, "terminal", encode(payload), time.time())
                await self.store.append(key, [commit])
                self.acks.durable(key, [commit])
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
                self._dispatch(self._pump())
        finally:
            self._recording = False
        if (stalled := self._stalled(busy=0)) is not None:  # pragma: no cover
            raise stalled


_YIELD_EVERY = 16
