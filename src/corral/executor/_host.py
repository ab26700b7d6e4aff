"""A host: a long-lived Ray actor that runs many trials at once on its own event loop.

It opens its own connections to the run's store and writes every commit there
itself, under the coordinator's claim. Jobs arrive in batches (`Host.submit`);
results go back in batches (`Host.exchange`, a long poll that also brings the
next jobs), each only
once every commit of its trial is durable, so whatever the coordinator starts
on the strength of a result (an evaluation, a child trial) is recorded after it,
even on another host.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.abc

from .._errors import CorralError
from .._protocols import Agent, Environment
from .._records import with_evaluation, without_state
from .._types import EVALUATED_STATUSES, Commit, TrialRecord
from ..runtime._acks import Acks
from ..runtime._evaluate import evaluate_trial
from ..runtime._handoff import Handoff
from ..runtime._retry import RetryPolicy
from ..runtime._trial import Deferred, TrialPlan, load_previous, run_trial
from ..store._protocol import CommitStore, SharedStore, TrialKey
from ..store._summary import SummaryBuilder
from ._jobs import EvalJob, ExecJob, Job, Notice, Result
from ._scopes import SharedScopes
from ._stores import StoreSpec
from ._wire import dumps, loads


@dataclass(frozen=True, slots=True)
class HostSpec:
    """Everything a host needs, pickled once by the coordinator and sent at its creation."""

    benchmark_id: str
    agents: Mapping[str, Agent]
    environments: Mapping[str, Environment]
    store: StoreSpec
    policy: RetryPolicy
    trial_timeout: float | None
    evaluation_timeout: float | None
    max_backlog: int
    #: The most bytes of JSON one recorded value may take (the run's ``max_value_bytes``).
    max_value_bytes: int
    #: Whether the coordinator has observers to tell of durable commits.
    notify: bool
    #: The name of the run's `ScopeHub` actor (made on first use).
    scope_hub: str


class HostActor:
    """The Ray actor (``ray.remote(HostActor)``): the calls the coordinator makes, each on
    the actor's event loop. Ray wraps every method of an actor class (for tracing), so the
    host's own methods live apart, in `Host`, and its per-job calls stay plain."""

    def __init__(self, spec: bytes, index: int) -> None:
        self._host = Host(spec, index)

    def pid(self) -> int:
        return os.getpid()

    async def serve(self) -> None:
        await self._host.serve()

    async def submit(self, batch: bytes) -> None:
        await self._host.submit(batch)

    async def exchange(self, batch: bytes) -> bytes:
        return await self._host.exchange(batch)

    async def close(self) -> None:
        await self._host.close()

    async def cancel(self) -> int:
        return await self._host.cancel()


class Host:
    """One host's work: jobs run on the actor's event loop, results gathered for the
    coordinator's long poll."""

    def __init__(self, spec: bytes, index: int) -> None:
        from ray import cloudpickle

        self.spec: HostSpec = cloudpickle.loads(spec)
        self.index = index
        self._done: list[Result] = []
        self._notices: list[Notice] = []
        self._failure: BaseException | None = None
        self._cancel = False
        self._events: dict[str, anyio.Event] = {}
        self._tg: anyio.abc.TaskGroup | None = None
        self._store: CommitStore | None = None
        self._acks: Acks | None = None
        self._running = 0
        self._scopes: SharedScopes | None = None
        #: Worker tasks waiting for their next job (a task per job would cost more).
        self._idle: list[Handoff[Job]] = []
        #: Records of trials this host ran, until their evaluation comes, by (t, r).
        self._ended: dict[tuple[int, int], TrialRecord] = {}

    def _event(self, name: str) -> anyio.Event:
        # Made on the actor's loop (anyio needs one running), on first use.
        event = self._events.get(name)
        if event is None:
            event = self._events[name] = anyio.Event()
        return event

    async def serve(self) -> None:
        """Run until `close` or `cancel`: the store open, jobs run as they come."""
        spec = self.spec
        store = spec.store.open()
        self._scopes = SharedScopes(spec.scope_hub, self.index, self._lost_hub)
        try:
            async with store.opened():
                async with _joined(store, spec):
                    await self._serve(store)
        except BaseException as exc:
            self._failure = exc
            raise
        finally:
            self._event("stopped").set()
            self._event("ready").set()  # a submit waiting for a host that never came up
            self._event("wake").set()

    async def _serve(self, store: CommitStore) -> None:
        notify = self._notice if self.spec.notify else _ignore
        acks = Acks(notify, self.spec.max_backlog)
        self._store, self._acks = store, acks
        async with anyio.create_task_group() as outer:
            outer.start_soon(acks.run)
            async with anyio.create_task_group() as tg:
                self._tg = tg
                self._event("ready").set()
                await self._event("closing").wait()
                if self._cancel:
                    tg.cancel_scope.cancel()
                while self._idle:  # the run is over: waiting workers end
                    self._idle.pop().hand(None)
            assert self._scopes is not None
            with anyio.CancelScope(shield=True):
                await self._scopes.settle()
            acks.close()  # returns once everything handed to the store is acknowledged

    async def submit(self, batch: bytes) -> None:
        """Start a batch of jobs (`_wire` bytes of a list)."""
        await self._event("ready").wait()
        if self._event("stopped").is_set() or self._tg is None:
            raise self._failure or CorralError(f"Ray host {self.index} has stopped")
        idle = self._idle
        for job in loads(batch):
            if type(job) is tuple:  # its evaluation went to another host: drop its record
                self._ended.pop(job, None)
            elif idle:
                idle.pop().hand(job)
            else:
                self._tg.start_soon(self._work, job)

    async def exchange(self, batch: bytes) -> bytes:
        """`submit` a batch, then wait for at least one result: every result and notice
        gathered so far, as `_wire` bytes. One call a round: the coordinator's long poll."""
        await self.submit(batch)
        while not self._done and self._failure is None and not self._event("stopped").is_set():
            await self._event("wake").wait()
            self._events["wake"] = anyio.Event()
        if self._failure is not None:
            raise self._failure
        done, notices = self._done, self._notices
        self._done, self._notices = [], []
        return dumps((done, notices))

    async def close(self) -> None:
        """Stop once idle (the run is over) and the store has everything."""
        self._event("closing").set()
        await self._event("stopped").wait()

    async def cancel(self) -> int:
        """Cancel every running job; return (how many were running) once they have all
        stopped and what they handed to the store has landed."""
        running = self._running
        self._cancel = True
        self._event("closing").set()
        await self._event("stopped").wait()
        return running

    def _lost_hub(self, error: BaseException) -> None:
        """The run's scope hub died: every job stops (nothing is recorded as an error);
        the coordinator hears of it with the next answer, and stops the run."""
        if self._failure is None:
            self._failure = CorralError(
                f"the run's concurrency scope hub (Ray actor {self.spec.scope_hub}) died: "
                f"{type(error).__name__}; the run stopped, and no trial was recorded as an "
                "error for it: run the benchmark again to resume"
            )
        self._cancel = True
        self._event("closing").set()
        self._event("wake").set()

    def _notice(self, key: TrialKey, commit: Commit) -> None:
        notices = self._notices
        if notices and notices[-1][1] == key.trial and notices[-1][0] == key.task_id:
            notices[-1][2].append(commit)  # a trial's commits come in runs: one entry each
        else:
            notices.append((key.task_id, key.trial, [commit]))

    def _complete(self, result: Result) -> None:
        self._done.append(result)
        self._event("wake").set()

    async def _work(self, first: Job) -> None:
        job: Job | None = first
        while job is not None:
            await self._run(job)
            if self._event("closing").is_set():
                return
            idle: Handoff[Job] = Handoff()
            self._idle.append(idle)
            job = await idle.wait()

    async def _run(self, job: Job) -> None:
        spec, store, acks, scopes = self.spec, self._store, self._acks, self._scopes
        assert store is not None and acks is not None and scopes is not None
        result: Result
        self._running += 1
        # The run's scopes, for this job's agents and tools: a task started from
        # `submit` has that call's context, not `serve`'s.
        try:
            with scopes.active():
                if isinstance(job, ExecJob):
                    key = TrialKey(spec.benchmark_id, job.task_id, job.r)
                    result = await self._execute(job, key, store, acks)
                else:
                    key = TrialKey(spec.benchmark_id, job.task_id, job.r)
                    record = await self._evaluate(job, key, store, acks)
                    # The state apart: the coordinator's report keeps records without one.
                    result = ("e", job.t, job.r, without_state(record), record.state)
        except Exception as exc:
            result = ("!", job.t, job.r, _portable(exc))
        finally:
            self._running -= 1
        acks.then(lambda: self._complete(result))
        if acks.full:  # the store lags: this host takes no more until it catches up
            await acks.room()

    async def _execute(self, job: ExecJob, key: TrialKey, store: CommitStore, acks: Acks) -> Result:
        spec, meta = self.spec, job.metadata
        plan = TrialPlan(
            key=key,
            metadata=meta,
            agent=spec.agents[meta.agent_id],
            environment=spec.environments[meta.environment_id],
            inputs=job.inputs,
            store=store,
            policy=spec.policy,
            trial_timeout=spec.trial_timeout,
            acks=acks,
            previous=job.previous,
            may_have_history=job.may_have_history,
            first_attempt=job.first_attempt,
            deferrals=job.deferrals,
            scratch=job.scratch,
            carried_usage=job.carried_usage,
            budget=job.budget,
            worked=job.worked,
            failed_attempts=job.failed_attempts,
            max_value_bytes=spec.max_value_bytes,
        )
        if job.reload is not None:
            plan.previous = await load_previous(store, key, job.reload)
        outcome = await run_trial(plan)
        if isinstance(outcome, Deferred):
            carried = (plan.scratch, plan.carried_usage, plan.worked, plan.failed_attempts)
            return ("d", job.t, job.r, outcome, *carried)
        record = outcome.record
        if record.status in EVALUATED_STATUSES:
            # Kept here for its evaluation, which the coordinator sends to this host.
            self._ended[(job.t, job.r)] = record
            return ("v", job.t, job.r, record.status, record.output, outcome.next_seq)
        return ("x", job.t, job.r, outcome)

    async def _evaluate(self, job: EvalJob, key: TrialKey, store: CommitStore, acks: Acks) -> Any:
        record = job.record or self._ended.pop((job.t, job.r), None)
        if record is None or job.may_have_history:
            # Its execution ran on another host (or on one that died), or it was sent
            # again after its host died and may have landed: the store tells.
            history = await store.history(key)
            if record is None:
                record = _unscored(key, history[: job.seq])
            if len(history) > job.seq and history[job.seq].kind == "evaluation":
                return with_evaluation(record, history[job.seq])
        return await evaluate_trial(
            self.spec.environments[job.environment_id],
            record,
            key=key,
            seq=job.seq,
            store=store,
            policy=self.spec.policy,
            acks=acks,
            time_limit=self.spec.evaluation_timeout,
            max_value_bytes=self.spec.max_value_bytes,
            facts=job.facts,
        )


def _unscored(key: TrialKey, history: list[Commit]) -> TrialRecord:
    """The record a scorer is given, from the trial's commits before its evaluation."""
    builder = SummaryBuilder(key.task_id, key.trial)
    for commit in history:
        builder.add(commit)
    return builder.build().record()


def _ignore(key: TrialKey, commit: Commit) -> None:
    return None


def _joined(store: CommitStore, spec: HostSpec) -> AbstractAsyncContextManager[Any]:
    """Write under the coordinator's claim (PostgreSQL's epoch); a store whose claim
    hosts need not join (SQLite's file lock) gives no epoch."""
    if isinstance(store, SharedStore) and spec.store.epoch is not None:
        return store.joined(spec.benchmark_id, spec.store.epoch)
    return nullcontext()


def _portable(exc: Exception) -> Exception:
    """``exc`` if it pickles (to be raised by the coordinator), else a `CorralError` naming it."""
    from ray import cloudpickle

    try:
        cloudpickle.dumps(exc)  # type: ignore[no-untyped-call]
    except Exception:
        return CorralError(f"on a Ray host: {exc!r}")
    return exc
