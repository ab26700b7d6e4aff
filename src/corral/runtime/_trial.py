"""One trial, from setup through its turns to the terminal commit, with retries and resume.

A trial's runtime needs nothing from the scheduler's process but its plan
(inputs, the store, its agent and environment): it could run on another worker.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio

from .._budget import NO_BUDGET, Exceeded
from .._errors import NotSerializableError, unwrap_single
from .._json import DEFAULT_MAX_VALUE_BYTES, PLAIN_MAPPINGS, check_json
from .._protocols import Agent, Environment
from .._records import evaluation_of, record_of
from .._tools import call_error, tools_of
from .._types import (
    EVALUATED_STATUSES,
    NO_USAGE,
    UNCHANGED,
    Action,
    Commit,
    Final,
    ToolEffect,
    TrialRecord,
    TrialStatus,
    Usage,
    new_commit,
)
from ..history import (
    ActionPayload,
    CommitKind,
    Payload,
    SetupPayload,
    Stamp,
    TerminalPayload,
    ToolEffectPayload,
    UsagePayload,
    encode,
    encode_worked,
    terminal,
)
from ..store._protocol import CommitStore, Pending, TrialKey
from ._acks import Acks
from ._jobs import Deferred, Previous, TrialJob, reopen_marker
from ._model_calls import CallLog, copied
from ._projection import Projection
from ._ratelimit import as_rate_limit
from ._retry import RetryPolicy, error_fields, met_cancellation
from ._session import AgentSession, add_usage
from ._workclock import WorkClock, to_microsecond


@dataclass(slots=True)
class TrialPlan:
    """Everything one trial's runtime needs: its job, and what the place that runs it
    supplies."""

    job: TrialJob
    key: TrialKey
    agent: Agent
    environment: Environment
    store: CommitStore
    policy: RetryPolicy
    trial_timeout: float | None
    #: Tells the observers of durable commits; the trial's last commits go here to be
    #: acknowledged after it returns.
    acks: Acks
    #: The most bytes of JSON one recorded value may take.
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    #: Where a deferred trial waits in another process (a Ray host's goes back to the
    #: coordinator): why a scratch cannot go there (None: it can).
    unsendable: Callable[[dict[str, Any]], NotSerializableError | None] | None = None


def step_key(key: TrialKey, action_seq: int) -> str:
    """The idempotency key of one action: stable across retries and processes."""
    raw = f"{len(key.benchmark_id)}:{key.benchmark_id}|{len(key.task_id)}:{key.task_id}"
    digest = hashlib.sha256(f"{raw}|{key.trial}|{action_seq}".encode()).hexdigest()
    return f"step-{digest[:32]}"


class _Writer:
    """Appends a trial's commits: allocates sequence numbers, hands them to the store,
    updates the projection and session, and tells the observers once durable.

    `stage` does not wait: a setup or tool-effect commit may still be on its way
    to disk while the agent decides, because nothing outside the trial depends
    on it yet. `flush` waits for everything staged, so an action staged before it
    is durable before its tool runs. The terminal is staged too and handed to the
    run's `Acks` when the trial returns: whatever depends on it (an evaluation,
    a child, the next reflective trial) is durable only after it, since a store
    makes appends durable in order. If a staged commit is lost in a crash, the
    resumed trial repeats that step (at-least-once, same step key), exactly as
    if the crash had come earlier.
    """

    def __init__(
        self, plan: TrialPlan, projection: Projection, session: AgentSession, clock: WorkClock
    ):
        self.plan = plan
        self.projection = projection
        self.session = session
        self.clock = clock
        #: The trial's budget, or None when it has none (checked once, not per step; most
        #: trials share the one of no limits, known by identity without `Budget.__bool__`).
        budget = plan.job.budget
        self.budget = None if budget is NO_BUDGET or not budget else budget
        #: Whether its commits record nothing beside their own value but the working
        #: time (no budget, no failed attempt; a terminal no model calls): no `_stamp`.
        self._plain = self.budget is None and not plan.job.failed_attempts
        #: ``next_seq``: the sequence number of the next commit staged; ``told``: the first
        #: the observers have not heard of from this attempt.
        self.next_seq = self.told = projection.next_seq
        self._pending: deque[tuple[Pending, list[Commit]]] = deque()
        #: What refused an append of this attempt (see `stage`).
        self._refused: BaseException | None = None

    @property
    def intact(self) -> bool:
        """Whether every append of the attempt landed (after `drain`): its projection
        is the store's."""
        return self._refused is None and not self._pending

    def adopt(self, handle: Pending, commits: list[Commit]) -> None:
        """Take ``commits``, handed over before this writer's own, as the first of its
        pending appends (a rerun's reopen marker): observers hear of them first."""
        self._pending.appendleft((handle, commits))
        self.told = commits[0].seq

    def hand_over(self) -> None:
        """The attempt is over: the run acknowledges what is still on its way.

        An append already known to have failed raises here, as in `flush`, and
        stays pending for `drain`.
        """
        pending, acks, key = self._pending, self.plan.acks, self.plan.key
        while pending:
            handle, commits = pending[0]
            acks.add(handle, key, commits)
            pending.popleft()
            self.told = commits[-1].seq + 1  # the acks tell the observers, or end the run

    def stage(self, items: Sequence[tuple[str, Payload, Usage]]) -> list[Commit]:
        """Number ``items`` past the head and hand them to the store, not waited for.

        Once an append could not be handed over (the store's ``enqueue`` raised), every
        later one of the attempt raises the same: the sequence numbers it took are gone,
        and another action of a parallel turn must not land its effect past them (a gap
        in the history). The attempt fails, and its retry starts from the store's history.
        """
        if self._refused is not None:
            raise self._refused
        calls = self.session.calls
        if calls.pending or calls.failed:
            # The model calls that led here land with what followed from them.
            items = _with_calls(calls, self.projection, items)
        # Each item numbered past the head, encoded and folded into the projection (in
        # here, not a method of its own: four stages a trial).
        now = time.time()
        worked = to_microsecond(self.clock.spent)
        plan, projection = self.plan, self.projection
        plain = self._plain
        commits = []
        try:
            for kind, payload, usage in items:
                # A terminal counts the trial's model calls: `_stamp` stamps it if it made any.
                if plain and (kind != "terminal" or projection.calls is None):
                    stored = encode_worked(payload, worked)
                else:
                    stored = encode(payload, _stamp(plan.job, projection, kind, worked))
                commit = new_commit(self.next_seq, kind, stored, now, usage)
                commits.append(commit)
                projection.apply(commit, payload)
                if kind == _MODEL_CALL:
                    calls.staged(commit.seq)
                self.next_seq += 1
            handle = plan.store.enqueue(plan.key, commits)
        except BaseException as exc:
            self._refused = exc
            raise
        self._pending.append((handle, commits))
        _sync(self.session, projection)
        return commits

    async def flush(self) -> None:
        """Wait until everything staged is durable; observers hear of it in order."""
        pending = self._pending
        while pending:
            handle, commits = pending[0]
            await handle.wait()
            pending.popleft()
            self._tell(commits)

    def _tell(self, commits: list[Commit]) -> None:
        self.plan.acks.durable(self.plan.key, commits)
        self.told = commits[-1].seq + 1

    def tell_landed(self, history: list[Commit]) -> None:
        """Tell the observers of commits that landed though their acknowledgement was
        lost (found in ``history``, the store's own, after a failed attempt)."""
        if len(history) > self.told:
            self._tell(history[self.told :])

    async def drain(self) -> None:
        """After a failed attempt: wait for what the store took and tell the observers.

        Stops at the first append that failed (the store refuses the trial's later
        ones too), and never raises.
        """
        pending = self._pending
        while pending:
            handle, commits = pending[0]
            try:
                await handle.wait()
            except Exception:
                return
            pending.popleft()
            self._tell(commits)

    def over_budget(self, pending: Usage = NO_USAGE) -> bool:
        """If the trial's committed usage (plus ``pending``, not yet committed) or its
        working time overran its budget, stage its ``limit`` terminal and say so."""
        budget = self.budget
        if budget is None:
            return False
        projection = self.projection
        exceeded = budget.exceeded(projection.usage + pending, self.clock.spent)
        if exceeded is None:
            return False
        session = self.session
        payload = _terminal(TrialStatus.LIMIT, session.attempt, session.state, failure=exceeded)
        self.stage([("terminal", payload, session.take_usage())])
        return True


_MODEL_CALL = CommitKind.MODEL_CALL


def _with_calls(
    calls: CallLog, projection: Projection, items: Sequence[tuple[str, Payload, Usage]]
) -> list[tuple[str, Payload, Usage]]:
    """``items`` after the model calls not yet recorded (a terminal among them: the
    failed tries no call followed, as a call that failed)."""
    if calls.failed and any(kind == "terminal" for kind, _, _ in items):
        calls.give_up()
    taken: list[tuple[str, Payload, Usage]] = [
        (_MODEL_CALL, p, NO_USAGE) for p in calls.take(projection, projection.history)
    ]
    return taken + list(items)


def _sync(session: AgentSession, projection: Projection) -> None:
    """Show ``session`` what ``projection`` holds (after each stage, and as an attempt
    begins)."""
    session.state = projection.state
    session.steps = projection.steps
    session.history = projection.history
    session.iteration = projection.iteration


@dataclass(slots=True)
class TrialOutcome:
    """How a trial's execution ended, as the scheduler and evaluation need it."""

    record: TrialRecord
    next_seq: int
    previous_trial: int | None


async def run_trial(plan: TrialPlan) -> TrialOutcome | Deferred:
    """Run (or continue) one trial until it has a terminal commit, or a rate limit.

    Its working time runs from here until it returns, except while it waits out a
    retry's backoff; a ``working_time_limit`` cuts an attempt at its deadline.
    """
    attempt = plan.job.first_attempt
    # Usage recorded in an attempt that ended before a commit could carry it rides
    # on the next commit, so the report counts every token spent.
    carried = plan.job.carried_usage
    scratch = plan.job.scratch
    projection = Projection()
    worked = plan.job.worked
    # A rerun's reopen marker, handed over as the trial starts: the first writer waits
    # for it as for its own commits (so observers hear of it first).
    marker: tuple[Pending, list[Commit]] | None = None
    if plan.job.may_have_history:
        try:
            history = await plan.store.history(plan.key)
        except anyio.get_cancelled_exc_class():
            # A deferred trial going on: what it carried since its wait lands, as the
            # run lands that of the trials still waiting.
            with anyio.CancelScope(shield=True, deadline=anyio.current_time() + CANCEL_GRACE):
                await land_deferred(plan.job, plan.key, plan.store, plan.acks)
            raise
        projection = Projection.of(history)
        if plan.job.reopen is not None:  # before what the attempt takes from its history
            marker = _reopen(plan, projection)
        if len(projection.failed_attempts) > len(plan.job.failed_attempts):  # resumed
            plan.job.failed_attempts = [dict(f) for f in projection.failed_attempts]
        if plan.job.deferrals and projection.next_seq > plan.job.deferred_at:
            # Deferred, then continued on a host that died after recording: its first
            # commit carried this usage and these calls (as a resumed trial, the calls
            # it had not recorded are lost with it).
            carried, plan.job.calls = NO_USAGE, None
        # The work its history recorded, if more (a fresh trial's, none: not looked for).
        worked = max(worked, projection.worked)
    assert plan.job.reopen is None  # a reopened trial has a history, read above
    # A resumed trial goes on counting its attempts (and its retries left) from those
    # its history recorded: a crash before a failure's next commit lost that failure.
    attempt = max(attempt, len(plan.job.failed_attempts))
    clock = WorkClock(worked)
    clock.start()
    working_limit = plan.job.budget.working_time_limit
    # What the attempt worked before a rate limit deferred it counts to its timeout.
    used = plan.job.attempt_worked
    while projection.terminal is None:
        previous = plan.job.previous
        if projection.has_setup and projection.previous_trial != (previous and previous.trial):
            # Resumed: the setup commit recorded which earlier trial this one saw.
            previous = await load_previous(plan.store, plan.key, projection.previous_trial)
        session = _session(plan, projection, attempt, scratch, previous)
        session._usage, carried = carried, NO_USAGE
        writer = _Writer(plan, projection, session, clock)
        if marker is not None:
            writer.adopt(*marker)
            marker = None
        error: BaseException | None = None
        # Why the attempt was cut short: "timeout" or "working_time_limit".
        cut: str | None = None
        began = clock.spent
        scope: anyio.CancelScope | None = None
        timeout = budget = math.inf
        try:
            if plan.trial_timeout is None and working_limit is None:  # no cancel scope to pay for
                await _attempt(plan, writer, session)
            else:
                timeout = _deadline(plan.trial_timeout, used)
                budget = clock.deadline(working_limit)
                with anyio.CancelScope(deadline=min(timeout, budget)) as scope:
                    await _attempt(plan, writer, session)
                if scope.cancelled_caught:
                    cut = "working_time_limit" if budget <= timeout else "timeout"
            if cut is None:
                writer.hand_over()
        except Exception as exc:
            if scope is not None and scope.cancel_called and met_cancellation(exc):
                # Its deadline cut it, and what the cancellation met raised instead (a
                # tool's cleanup failing): it outlived its time all the same. An error
                # no cancellation reached (past a call it could not cut) is its own.
                cut = "working_time_limit" if budget <= timeout else "timeout"
            else:
                error = exc
        except anyio.get_cancelled_exc_class():
            # The run is cancelled (Ctrl-C, its cancel scope, `Task.cancel()`): what the
            # agent recorded and spent lands before it stops, as before a wait.
            await _land_on_cancel(plan, projection, session.take_usage(), clock, writer)
            raise
        if error is None and cut is None:
            break
        try:
            await writer.drain()  # what the store took, observers hear of, even now
        except anyio.get_cancelled_exc_class():
            if error is None or as_rate_limit(error) is None:  # a rate limit is no failure
                _failed_attempt(plan, attempt, error)
            await _land_on_cancel(plan, projection, session.take_usage(), clock, writer)
            raise
        carried = session.take_usage()
        limited = as_rate_limit(error) if error is not None else None
        if limited is not None and (
            gave_up := plan.policy.rate_limit_exhausted(limited, plan.job.deferrals)
        ):
            error = gave_up  # ends the trial below, naming the rate limit
        elif (
            limited is not None and plan.unsendable and (stuck := plan.unsendable(session.scratch))
        ):
            # It cannot wait where it would (it would fail the host's whole answer): its
            # attempt alone fails below, saying why (retried as any failed attempt).
            error = stuck
        elif limited is not None:
            # Not a failed attempt: the same trial goes on later, scratch and all. The
            # calls it made land first (a run cancelled during the wait keeps them).
            if writer.intact:
                carried = await _land_calls(plan, projection, carried, clock)
            plan.job.scratch, plan.job.carried_usage = session.scratch, carried
            plan.job.deferred_at = projection.next_seq
            clock.stop()
            plan.job.attempt_worked = used + clock.spent - began
            plan.job.worked = clock.spent  # waiting out the rate limit is not work
            delay = plan.policy.rate_limit_wait(limited.retry_after, plan.job.deferrals)
            return Deferred(delay, attempt, limited.retry_after)
        # An interrupted append may still have landed: the store's history, which
        # includes every append handed to it, is the truth from here on.
        try:
            history = await plan.store.history(plan.key)
        except anyio.get_cancelled_exc_class():
            # What the failed attempt spent is in hand only: it lands before the run stops.
            _failed_attempt(plan, attempt, error)
            await _land_on_cancel(plan, projection, carried, clock, writer)
            raise
        writer.tell_landed(history)
        projection = Projection.of(history)
        if projection.terminal is not None:
            break
        if cut == "timeout":
            text = f"TimeoutError: attempt exceeded trial_timeout of {plan.trial_timeout} s"
            failure: Mapping[str, Any] = {"error": text, "error_type": "TimeoutError"}
            await _end(plan, projection, attempt, TrialStatus.TIMEOUT, failure, carried, clock)
        elif cut is not None:
            clock.stop()
            assert working_limit is not None
            # The deadline is where the clock reaches the limit (up to rounding): short
            # of it, the limit as given (an int stays one: round, not to_microsecond).
            exceeded = Exceeded(cut, round(max(clock.spent, working_limit), 6), working_limit)
            await _end(plan, projection, attempt, TrialStatus.LIMIT, exceeded, carried, clock)
        elif _failed_attempt(plan, attempt, error):
            # Its calls land before the backoff (a run cancelled during it keeps them).
            carried = await _land_calls(plan, projection, carried, clock)
            clock.stop()  # a backoff is not work
            try:
                await anyio.sleep(plan.policy.delay(attempt))
            except anyio.get_cancelled_exc_class():
                # Its tries that no reply followed wait for the retry's next call: the
                # run stops first, so they land now, and with them its error.
                await _land_on_cancel(plan, projection, carried, clock)
                raise
            clock.start()
            attempt += 1
            used = 0.0  # a new attempt, a new trial_timeout
            scratch = None  # a retry starts from the store, not from memory
        else:
            assert error is not None
            failure = error_fields(error)
            await _end(plan, projection, attempt, TrialStatus.ERROR, failure, carried, clock)
    return _outcome(plan, projection)


def _failed_attempt(plan: TrialPlan, attempt: int, error: BaseException | None) -> bool:
    """If attempt ``attempt`` failed with ``error`` and gets another try, count it among
    the trial's failed attempts (its next commit records its error) and say so: a run
    cancelled before its retry lands it with what the attempt spent."""
    if error is None or not plan.policy.retryable(error, attempt):
        return False
    plan.job.failed_attempts.append({"attempt": attempt + 1, **error_fields(error)})
    return True


def _reopen(plan: TrialPlan, projection: Projection) -> tuple[Pending, list[Commit]] | None:
    """Hand over the reopen marker of the rerun this job starts, unless it landed
    already (from a host that died since, say), and fold it in: not waited for, as a
    setup is not; what the attempt writes after it lands after it."""
    assert plan.job.reopen is not None
    seq, status = plan.job.reopen
    plan.job.reopen = None  # a deferred job goes on past it
    if projection.next_seq != seq:
        return None
    commit = reopen_marker(seq, status)
    handle = plan.store.enqueue(plan.key, [commit])
    projection.apply(commit)
    return handle, [commit]


def _deadline(timeout: float | None, used: float) -> float:
    """When an attempt that has worked ``used`` seconds already outlives ``timeout``."""
    return float("inf") if timeout is None else anyio.current_time() + max(0.0, timeout - used)


def _session(
    plan: TrialPlan,
    projection: Projection,
    attempt: int,
    scratch: dict[str, Any] | None,
    previous: Previous | None,
) -> AgentSession:
    """An attempt's session, seeing ``previous`` (a reflective trial's earlier one).
    Not a coroutine: only a resumed trial has a previous one to read (`run_trial`)."""
    session = AgentSession(
        benchmark_id=plan.key.benchmark_id,
        task_id=plan.key.task_id,
        trial=plan.key.trial,
        metadata=plan.job.metadata,
        # Its own copy: what an agent writes into it must not reach the task's other
        # trials nor its metadata (the benchmark's configuration); an attempt starts
        # from the inputs as a resumed one would.
        inputs=copied(plan.job.inputs),
        attempt=attempt,
        previous_evaluation=previous.evaluation if previous else None,
        previous_state=previous.state if previous else None,
        previous_trial=previous.trial if previous else None,
        previous_status=previous.status if previous else None,
        calls=plan.job.calls,  # None: the session makes the trial's log, kept below
    )
    plan.job.calls = session.calls
    if scratch is not None:
        session.scratch = scratch
    _sync(session, projection)
    return session


def _calls_of(job: TrialJob) -> CallLog:
    if job.calls is None:
        job.calls = CallLog()
    return job.calls


async def load_previous(store: CommitStore, key: TrialKey, trial: int | None) -> Previous | None:
    """The earlier trial ``trial`` as a reflective session sees it: finished. A trial is
    only ever shown one that had finished, so when a rerun has reopened it since and
    its new attempt has not finished (nor been scored), the attempt before is the one
    this trial saw (the one the report counts meanwhile), not the new one's setup."""
    if trial is None:
        return None
    commits = await store.history(TrialKey(key.benchmark_id, key.task_id, trial))
    earlier = Projection.of(commits)
    scored = earlier.evaluation
    if earlier.reopen_seq >= 0 and not earlier.finished_and_scored:
        standing = earlier.standing
        # Up to the reopen that ended the standing attempt: a rerun between them that
        # never finished was not it (nor shown to anyone).
        end = earlier.reopen_seq if standing is None else _reopened_after(commits, standing[0])
        earlier = Projection.of([c for c in commits if c.seq < end])
        # A rescore of that attempt is appended after the marker: the fold kept it.
        scored = standing[1] if standing is not None else earlier.evaluation
    evaluation = evaluation_of(scored) if scored else None
    status = None if earlier.ended is None else str(earlier.ended.status)
    return Previous(trial, evaluation, earlier.state, status)


def _reopened_after(commits: Sequence[Commit], terminal: Commit) -> int:
    """The sequence number of the ``reopen`` that ended the attempt ``terminal`` ended."""
    return next(c.seq for c in commits if c.seq > terminal.seq and c.kind == CommitKind.REOPEN)


async def _attempt(plan: TrialPlan, writer: _Writer, session: AgentSession) -> None:
    projection = writer.projection
    limit = plan.max_value_bytes
    session.tools = tools_of(plan.environment, session)  # inside the attempt: may raise
    if not projection.has_setup:
        state = await plan.environment.setup(session)
        setup = SetupPayload(
            check_json(state, "the state returned by setup", limit), session.previous_trial
        )
        writer.stage([("setup", setup, session.take_usage())])
    # Budgets are checked after every commit that may carry usage, and before a
    # resumed trial does anything (its budget may have been lowered since); a trial
    # without one skips the calls.
    budgeted = writer.budget is not None
    # The usage a failed or deferred attempt left (carried, not yet committed) counts.
    if budgeted and writer.over_budget(session._usage):
        return
    turn = projection.open_turn
    if turn is not None:
        # The head is an action (or part of a parallel turn) without its effect:
        # finish it with the same step keys before the agent decides anything new.
        missing = [(seq, action, step_key(plan.key, seq)) for seq, action in turn.missing]
        await _execute(writer, session, missing, turn.state_before)
    max_iterations = plan.job.metadata.max_iterations
    while projection.iteration < max_iterations:
        if budgeted and writer.over_budget(session._usage):
            return
        decision = await plan.agent.act(session)
        if isinstance(decision, Final):
            # An answer bought over budget is not a completed trial.
            if budgeted and writer.over_budget(session._usage):
                return
            output = check_json(decision.output, "the Final output", limit)
            ended = terminal(
                TrialStatus.COMPLETED,
                attempts=session.attempt + 1,
                state=session.state,
                output=output,
            )
            writer.stage([("terminal", ended, session.take_usage())])
            return
        actions = _actions(decision)
        turn_no = projection.iteration
        # Checked before the model calls are taken: an action that cannot be recorded
        # fails the attempt, and the calls (and their usage) stay for its terminal.
        checked = [
            (
                check_json(action.tool, "Action.tool", limit),
                check_json(action.arguments, ("the arguments of {!r}", action.tool), limit),
            )
            for action in actions
        ]
        usage = session.take_usage()
        # The model calls that chose these actions come first, in the same append
        # (their sequence numbers before the actions', which the step keys use).
        items = _with_calls(session.calls, projection, ()) if session.calls.pending else []
        first = writer.next_seq + len(items)
        keyed = []
        for index, (action, (tool, arguments)) in enumerate(zip(actions, checked, strict=True)):
            seq = first + index
            key = step_key(plan.key, seq)
            declared = ActionPayload(tool, arguments, turn_no, index, key)
            items.append(("action", declared, usage if index == 0 else Usage()))
            keyed.append((seq, action, key))
        writer.stage(items)
        await writer.flush()  # the actions are durable before any of them runs
        if budgeted and writer.over_budget():  # the turn's model call overran: no tools run
            return
        await _execute(writer, session, keyed, session.state)
    if writer.over_budget():
        return
    writer.stage(
        [
            (
                "terminal",
                _terminal(TrialStatus.MAX_ITERATIONS, session.attempt, session.state),
                session.take_usage(),
            )
        ]
    )


def _actions(decision: object) -> list[Action]:
    if isinstance(decision, Action):
        return [_checked(decision)]
    if isinstance(decision, Sequence) and not isinstance(decision, str | bytes):
        actions = list(decision)
        if actions and all(isinstance(a, Action) for a in actions):
            return [_checked(a) for a in actions]
    raise TypeError(
        f"act() returned {decision!r}; expected an Action, a non-empty sequence of Actions, "
        "or Final"
    )


def _checked(action: Action) -> Action:
    """``action`` if it names its tool with a string and gives its arguments as a mapping
    (SPEC 1), else a `TypeError` naming it: nothing else is recorded or executed."""
    if not isinstance(action.tool, str):
        raise TypeError(f"act() returned tool {action.tool!r} of {action!r}; expected a string")
    if type(action.arguments) not in PLAIN_MAPPINGS and not isinstance(action.arguments, Mapping):
        raise TypeError(
            f"act() returned arguments {action.arguments!r} of {action!r}; expected a mapping"
        )
    return action


def _execute(
    writer: _Writer,
    session: AgentSession,
    actions: list[tuple[int, Action, str]],
    state_before: Any,
) -> Awaitable[None]:
    """Execute a turn's actions (seq, action, step key) and stage their effects.

    Not a coroutine itself: a turn's one action, the common case, is awaited as
    `_one` by the caller, without a coroutine between them.
    """
    if len(actions) == 1 and session.state is state_before:
        # One action: the session itself is its view (its usage was taken by the
        # action commit, so what execute records is the tool effect's).
        seq, action, key = actions[0]
        return _one(writer, session, seq, action, key, session)
    return _parallel(writer, session, actions, state_before)


async def _one(
    writer: _Writer, session: AgentSession, seq: int, action: Action, key: str, view: AgentSession
) -> None:
    """Execute ``action`` (committed at ``seq``) with ``view`` (``session``'s, or its
    own: `AgentSession.for_action`) and stage its effect."""
    view.step_key = key
    tools = session.tools
    # A call the environment's declared tools refuse never reaches it: its error
    # is the observation, so a model sees its mistake.
    refused = None if tools is None else call_error(tools, action.tool, action.arguments)
    try:
        if refused is None:
            effect = await writer.plan.environment.execute(action, view)
        else:
            effect = ToolEffect(refused)
    except BaseException:
        if view is not session:  # what a failed call used is carried, as on the session
            session._usage = add_usage(session._usage, view.take_usage())
        raise
    finally:
        view.step_key = None
    if not isinstance(effect, ToolEffect):
        raise TypeError(f"execute({action.tool!r}) returned {effect!r}, not a ToolEffect")
    limit = writer.plan.max_value_bytes
    observation = check_json(effect.observation, ("the observation of {!r}", action.tool), limit)
    state = effect.state
    if state is not UNCHANGED:
        state = check_json(state, ("the state after {!r}", action.tool), limit)
    done = ToolEffectPayload(seq, observation, state)
    writer.stage([("tool_effect", done, view.take_usage())])


async def _parallel(
    writer: _Writer,
    session: AgentSession,
    actions: list[tuple[int, Action, str]],
    state_before: Any,
) -> None:
    """Execute a parallel turn's actions side by side, each with its own view.

    A failing action does not stop the others of its turn: once all have ended,
    the turn fails as its first failing action in declared order says (its own
    type, message and retry rule), whichever failed first in time, and what the
    others did is recorded (a retry does not repeat it).
    """
    failures: list[Exception | None] = [None] * len(actions)

    async def caught(index: int, seq: int, action: Action, key: str, view: AgentSession) -> None:
        try:
            await _one(writer, session, seq, action, key, view)
        except Exception as exc:
            failures[index] = exc

    with unwrap_single():  # an interrupt in one action leaves as itself
        async with anyio.create_task_group() as tg:
            for index, (seq, action, key) in enumerate(actions):
                # Each its own step key and usage; every action of a turn sees the
                # turn's starting state.
                view = session.for_action(key)
                view.state = state_before
                tg.start_soon(caught, index, seq, action, key, view)
    for failure in failures:
        if failure is not None:
            raise failure


def _terminal(
    status: TrialStatus,
    attempt: int,
    state: Any,
    output: Any = None,
    failure: Mapping[str, Any] | Exceeded | None = None,
) -> TerminalPayload:
    if isinstance(failure, Exceeded):
        failure = failure.fields()
    return terminal(status, attempts=attempt + 1, state=state, output=output, failure=failure)


async def _end(
    plan: TrialPlan,
    projection: Projection,
    attempt: int,
    status: TrialStatus,
    failure: Mapping[str, Any] | Exceeded,
    usage: Usage,
    clock: WorkClock,
) -> None:
    """Commit the terminal of a trial whose attempt failed, timed out or overran (after
    the model calls not yet recorded)."""
    now = time.time()
    payload = _terminal(status, attempt, projection.state, failure=failure)
    calls = _calls_of(plan.job)
    made = _with_calls(calls, projection, [("terminal", payload, usage)])[:-1]
    commits = _call_commits(calls, projection, [p for _, p, _ in made], NO_USAGE, now)
    stamp = _stamp(plan.job, projection, "terminal", to_microsecond(clock.spent))
    commit = Commit(projection.next_seq, "terminal", encode(payload, stamp), now, usage)
    commits.append(commit)
    # The runtime's own commits, their values checked when recorded: `append`'s payload
    # check would refuse a value as deep as allowed once the payload wraps it.
    await _write(plan.store, plan.acks, plan.key, commits)
    projection.apply(commit, payload)


async def _land_calls(
    plan: TrialPlan, projection: Projection, usage: Usage, clock: WorkClock
) -> Usage:
    """Write the trial's model calls that no commit carried yet, ``usage`` (spent and
    not yet committed) on the last, before the trial waits (a rate limit, a retry's
    backoff): a run cancelled meanwhile keeps them. Returns the usage still to carry
    (all of it when there was no call to carry it). They record the working time so
    far, and the failed attempts, as the writer's commits do."""
    calls = _calls_of(plan.job)
    if not calls.pending:
        return usage
    payloads = calls.take(projection, projection.history)
    stamp = _stamp(plan.job, projection, _MODEL_CALL, to_microsecond(clock.spent))
    commits = _call_commits(calls, projection, payloads, usage, time.time(), stamp)
    await _write(plan.store, plan.acks, plan.key, commits)  # the runtime's own: checked
    return NO_USAGE


async def _write(store: CommitStore, acks: Acks, key: TrialKey, commits: list[Commit]) -> None:
    """Append the runtime's own ``commits``, wait until they are durable and tell the
    observers. The run cancelled meanwhile, they are on their way all the same: the
    run's acks tell them once they land as it stops (`Acks.run`)."""
    handle = store.enqueue(key, commits)
    try:
        await handle.wait()
    except anyio.get_cancelled_exc_class():
        try:
            acks.add(handle, key, commits)
        except Exception:  # it failed: nothing to tell, and the run stays cancelled
            pass
        raise
    acks.durable(key, commits)


#: The most seconds a cancelled attempt waits for its appends and calls to land (and,
#: side by side, the run's acks to tell what lands meanwhile; after the running trials,
#: the run for its deferred trials' usage: `land_deferred`): twice this stays within the
#: second in which a cancelled run stops (SPEC 3.2).
CANCEL_GRACE = 0.5


async def _land_on_cancel(
    plan: TrialPlan,
    projection: Projection,
    usage: Usage,
    clock: WorkClock,
    writer: _Writer | None = None,
) -> None:
    """The run is cancelled: shielded and bounded (`CANCEL_GRACE`), write the trial's
    model calls not yet recorded, its tries that no reply followed (as a call that
    failed: the resumed trial asks afresh), and ``usage`` on the last, with the working
    time and failed attempts (`_land_calls`); with no call to carry them, ``usage`` and
    the failed attempts no commit recorded land as a ``usage`` commit (`_land_usage`).
    Mid-attempt (``writer``), only once every append of the attempt landed: none past
    a gap. A store that refuses them loses them, as a crash would, and the run stays
    cancelled (no store error in its place)."""
    with anyio.CancelScope(shield=True, deadline=anyio.current_time() + CANCEL_GRACE):
        if writer is not None:
            await writer.drain()
            if not writer.intact:
                return
        _calls_of(plan.job).give_up()
        try:
            usage = await _land_calls(plan, projection, usage, clock)
            await _land_usage(
                plan.job, plan.key, plan.store, plan.acks, projection, usage, clock.spent
            )
        except Exception as exc:
            _lost_on_cancel(plan.key, exc)


async def land_deferred(job: TrialJob, key: TrialKey, store: CommitStore, acks: Acks) -> None:
    """The run is cancelled while ``job`` waits out a rate limit (its model calls landed
    before it waited): what it still carries (its usage, failed attempts no commit
    recorded) lands as a ``usage`` commit. Called shielded, within one `CANCEL_GRACE`
    for every deferred trial of the run (a store that refuses it loses it, logged)."""
    if not job.carried_usage and not job.failed_attempts:
        return  # nothing to land: no read of its history
    try:
        projection = Projection.of(await store.history(key))
        # A history past where the wait began was written by a host that went on with
        # the trial and died: its first commit carried this usage already (as
        # `run_trial` reads it).
        carried = job.deferrals and projection.next_seq > job.deferred_at
        usage = NO_USAGE if carried else job.carried_usage
        if projection.terminal is None:
            await _land_usage(job, key, store, acks, projection, usage, job.worked)
    except Exception as exc:
        _lost_on_cancel(key, exc)


def _lost_on_cancel(key: TrialKey, exc: Exception) -> None:
    """One line a trial (a dead store fails them all alike): what it spent is lost."""
    logging.getLogger("corral").warning(
        "trial %s#%d: what it spent could not be written as the run stopped: %s: %s",
        key.task_id,
        key.trial,
        type(exc).__name__,
        exc,
    )


async def _land_usage(
    job: TrialJob,
    key: TrialKey,
    store: CommitStore,
    acks: Acks,
    projection: Projection,
    usage: Usage,
    worked: float,
) -> None:
    """Write ``usage`` and the failed attempts no commit recorded, if there are any, as
    a ``usage`` commit: only when the run is cancelled (before a wait the trial goes on
    from, the next commit carries them; a commit of their own would shift the step
    keys of the trial's later actions)."""
    if not usage and len(projection.failed_attempts) >= len(job.failed_attempts):
        return
    stamp = _stamp(job, projection, _USAGE, to_microsecond(worked))
    commit = Commit(projection.next_seq, _USAGE, encode(_NO_PAYLOAD, stamp), time.time(), usage)
    await _write(store, acks, key, [commit])  # the runtime's own: checked
    projection.apply(commit, _NO_PAYLOAD)


_USAGE = CommitKind.USAGE
_NO_PAYLOAD = UsagePayload()


def _call_commits(
    calls: CallLog,
    projection: Projection,
    payloads: Sequence[Payload],
    usage: Usage,
    now: float,
    stamp: Stamp | None = None,
) -> list[Commit]:
    """``payloads`` (model calls taken from ``calls``) as the trial's next commits,
    folded into ``projection``; the last carries ``usage``."""
    commits = []
    for index, made in enumerate(payloads):
        spent = usage if index == len(payloads) - 1 else NO_USAGE
        call = Commit(projection.next_seq, _MODEL_CALL, encode(made, stamp), now, spent)
        projection.apply(call, made)
        calls.staged(call.seq)
        commits.append(call)
    return commits


def _stamp(job: TrialJob, projection: Projection, kind: str, worked: float) -> Stamp:
    """What a trial's commit records beside its own value (every writer of one calls this):
    the working time (it survives a crash with the commit), the budgets that applied
    (`corral show`), and the failed attempts' errors."""
    budget = job.budget
    stamped = budget.to_dict() if kind in _BUDGETED and budget else None
    failed = job.failed_attempts
    # The terminal counts the trial's model calls, so a report need not read them.
    calls = projection.calls if kind == "terminal" else None
    # The terminal carries them all; so does an attempt's first commit after a failure,
    # which keeps them durable if the process dies before the terminal.
    if failed and (kind == "terminal" or len(projection.failed_attempts) < len(failed)):
        return Stamp(worked, stamped, tuple(failed), calls)
    return Stamp(worked, stamped, None, calls)


_BUDGETED = frozenset({"setup", "terminal"})


def _outcome(plan: TrialPlan, projection: Projection) -> TrialOutcome:
    terminal = projection.terminal
    assert terminal is not None
    # Shared while nothing was used: no object per trial.
    usage = projection.spend
    ended = projection.ended
    # To be scored: the record its scorer is given, built once.
    facts = plan.job.facts if ended is not None and ended.status in EVALUATED_STATUSES else None
    record = record_of(
        plan.key.task_id,
        plan.key.trial,
        terminal=terminal,
        evaluation=None,
        commits=projection.commits,
        started_at=projection.started_at,
        ended=ended,
        usage=usage,
        facts=facts,
    )
    return TrialOutcome(record, projection.next_seq, projection.previous_trial)
