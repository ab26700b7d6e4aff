"""Admission: the one decision of what starts next, over every counter at once.

Pure bookkeeping, no I/O and no tasks: the run loop asks `next_starts()` after
every change and starts exactly what it is given. A trial is admitted only
when every counter it needs has room, and then takes all of them at once, so
nothing ever holds one slot while it waits for another. Trials are identified
by (task index, round) and never materialised before admission: the per-trial
state is one byte.
"""

from __future__ import annotations

import heapq
import itertools
import operator
from array import array
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import NamedTuple

from .._types import EVALUATED_STATUSES, TrialStatus
from ._keyed import KeyedCounter, KeyedLimit, LimitPhase
from ._limits import Limits
from ._plan import RunPlan

#: One byte per trial: 0 while it has not ended, else 1 + the status's position.
STATUS_CODES: dict[TrialStatus, int] = {status: i + 1 for i, status in enumerate(TrialStatus)}
STATUS_OF_CODE: dict[int, TrialStatus] = {code: status for status, code in STATUS_CODES.items()}
_COMPLETED = STATUS_CODES[TrialStatus.COMPLETED]


class Phase(IntEnum):
    PENDING = 0  # not started
    QUEUED = 1  # ready: waiting in admission's queue for its counters
    RUNNING = 2  # admitted for execution (or being recorded as unreachable)
    ENDED = 3  # has a terminal commit; evaluation may be pending
    DONE = 4  # evaluated, or ended with nothing to evaluate


class StartKind(IntEnum):
    EXECUTE = 0
    EVALUATE = 1
    UNREACHABLE = 2


class Start(NamedTuple):
    """One admitted start: a named tuple, built per trial by ``tuple.__new__`` (`_start`),
    which makes it in C (a dataclass's ``__init__``, or a named tuple's ``__new__``, is
    a Python call)."""

    kind: StartKind
    task: int
    round: int
    #: For UNREACHABLE: the parent task index and round state that caused it.
    cause: int = -1


_start = tuple.__new__


@dataclass(frozen=True, slots=True, init=False)
class Statistics:
    """A snapshot of the counters (what the progress display and tests read).

    The keyed limits' slots in use are in `in_use` by each declaration's statistics
    name (``by_model``, ...; keywords of that name build it), and the caps an
    adaptive one applies now in `effective_caps` (keyword ``effective_`` + the name);
    `used` and `effective` read them by declaration."""

    executing: int
    evaluating: int
    #: Trials in the ready queue: at most one round per task (the next one is queued
    #: when it starts).
    ready: int
    awaiting_evaluation: int
    finished: int
    total: int
    #: Each keyed limit's slots in use, by key, by its statistics name.
    in_use: Mapping[str, dict[str, int]]
    #: The limit admission applies to each key of an adaptive limit now: the
    #: configured one, or less while it is rate-limited (see `Admission.rate_limited`).
    effective_caps: Mapping[str, dict[str, int]]
    #: Trials waiting out a rate limit, holding no slot.
    deferred: int
    #: Trials that would be ready now but for ``max_parallel_per_task``: they wait for
    #: their task's earlier trials.
    held_by_task: int
    #: How often so far a trial waited for ``max_parallel_per_task`` alone: an execution
    #: slot it could take was free.
    task_limit_waits: int
    #: The tasks whose trials did, in the order they first did.
    task_limit_tasks: tuple[str, ...]

    def __init__(
        self,
        executing: int,
        evaluating: int,
        ready: int,
        awaiting_evaluation: int,
        finished: int,
        total: int,
        *,
        in_use: Mapping[str, dict[str, int]] | None = None,
        effective_caps: Mapping[str, dict[str, int]] | None = None,
        deferred: int = 0,
        held_by_task: int = 0,
        task_limit_waits: int = 0,
        task_limit_tasks: tuple[str, ...] = (),
        **keyed: dict[str, int],
    ) -> None:
        put = object.__setattr__
        put(self, "executing", executing)
        put(self, "evaluating", evaluating)
        put(self, "ready", ready)
        put(self, "awaiting_evaluation", awaiting_evaluation)
        put(self, "finished", finished)
        put(self, "total", total)
        put(self, "deferred", deferred)
        put(self, "held_by_task", held_by_task)
        put(self, "task_limit_waits", task_limit_waits)
        put(self, "task_limit_tasks", task_limit_tasks)
        used = dict(in_use or {})
        effective = dict(effective_caps or {})
        for name, value in keyed.items():  # ``by_model={...}``, ``effective_by_model={...}``
            if name.startswith("effective_"):
                effective[name.removeprefix("effective_")] = value
            else:
                used[name] = value
        put(self, "in_use", used)
        put(self, "effective_caps", effective)

    def used(self, limit: KeyedLimit) -> dict[str, int]:
        """The slots of a keyed limit in use, by key."""
        return self.in_use.get(limit.statistics, {})

    def effective(self, limit: KeyedLimit) -> dict[str, int]:
        """The caps an adaptive keyed limit applies now, by key."""
        return self.effective_caps.get(limit.statistics, {})

    @property
    def by_model(self) -> dict[str, int]:
        return self.in_use.get("by_model", {})

    @property
    def by_environment(self) -> dict[str, int]:
        return self.in_use.get("by_environment", {})

    @property
    def evaluations_by_environment(self) -> dict[str, int]:
        return self.in_use.get("evaluations_by_environment", {})

    @property
    def effective_by_model(self) -> dict[str, int]:
        """The limit admission applies to each model now."""
        return self.effective_caps.get("by_model", {})


def _fresh(phase: bytearray) -> bool:
    """Whether no trial of a run has started (every phase PENDING)."""
    return not any(phase)


class Admission:
    def __init__(
        self,
        plan: RunPlan,
        limits: Limits,
        eval_keys: Sequence[str],
        phases: bytearray | None = None,
        statuses: bytearray | None = None,
        *,
        critical_path: bool = True,
    ) -> None:
        n = plan.trials_per_task
        tasks = len(plan.task_ids)
        self.plan = plan
        self.limits = limits
        self.rounds = n
        # phase[t * n + r]: trial (t, r)'s `Phase`; one array for every trial (an array
        # per task costs some 60 bytes a task more).
        self.phase = phases if phases is not None else bytearray(tasks * n)
        # status[t * n + r]: how trial (t, r) ended, as a STATUS_CODES code (0: not ended).
        self.status = statuses if statuses is not None else bytearray(tasks * n)
        self.sequential = limits.max_parallel_per_task == 1
        # Among ready trials, those on the longest remaining dependency chain go first
        # (then lower rounds, then task order); False gives plain FIFO by round and task.
        self._rank = [-d for d in plan.depth] if critical_path else [0] * tasks
        # Then, among equals, the scarcest resource first (see `_best_bucket`).

        # One counter array per declared keyed limit (`Limits.declarations`).
        meta = plan.lights()
        if len(eval_keys) != tasks:
            raise ValueError(f"{len(eval_keys)} evaluation keys for {tasks} tasks")
        self.counters = [
            KeyedCounter(
                limit, limit.keys(meta, eval_keys), limits.keyed(limit), limits.max_parallel
            )
            for limit in limits.declarations
        ]
        self._adaptive = next((c for c in self.counters if c.limit.adaptive), None)
        self._successes = [0] * (0 if self._adaptive is None else len(self._adaptive.cap))
        executions = [c for c in self.counters if c.limit.phase is LimitPhase.EXECUTION]
        evaluations = [c for c in self.counters if c.limit.phase is LimitPhase.EVALUATION]
        # Per task: its bucket under each phase's limits (the counters it needs), and
        # the (in use, index) pairs its slots take (shared by a bucket's tasks). Built
        # column by column: no Python call per task.
        self._bucket, buckets = _buckets(executions, tasks)
        self._eval_bucket, eval_buckets = _buckets(evaluations, tasks)
        self._slots = _slots(executions, self._bucket, buckets)
        self._eval_slots = _slots(evaluations, self._eval_bucket, eval_buckets)
        # Per bucket: the (in use, effective cap, index) it must find room in, and its
        # scarcity (the smallest configured cap, for the critical-path order).
        self._checks: dict[Bucket, tuple[tuple[list[int], list[int], int], ...]] = {}
        self._scarcity: dict[Bucket, int] = {}
        for bucket in buckets:
            self._checks[bucket] = _checks(executions, bucket)
            caps = [c.cap[i] for c, i in zip(executions, bucket, strict=True) if i >= 0]
            self._scarcity[bucket] = min([limits.max_parallel, *caps]) if critical_path else 0
        self._eval_checks = {b: _checks(evaluations, b) for b in eval_buckets}
        self.executing = 0
        self.evaluating = 0
        self.task_running = [0] * tasks
        self.task_inflight = [0] * tasks  # started and not DONE
        self.next_round = [0] * tasks  # the lowest round still PENDING
        self.task_queued = [0] * tasks  # rounds in the ready queue
        self.finished = 0
        self.total = tasks * n

        # Ready executions, bucketed by the limited (model, environment) they need, so
        # one blocked bucket never hides a trial that fits: the head of every bucket
        # that has room is a candidate, and the best candidate starts.
        self._ready: dict[Bucket, _Ready] = {}
        self._ready_count = 0
        # While built: what is queued goes to each bucket's arrays, not its heap.
        self._building = True
        self._evals: dict[Bucket, deque[tuple[int, int]]] = {}
        self._eval_count = 0
        self._eval_order = itertools.count()
        self._unreachable: deque[Start] = deque()
        self._deferred = 0
        self._parked: dict[int, list[int]] = {}  # resumed rounds waiting for per-task room
        # Tasks whose next round waits for max_parallel_per_task alone (bounded by the
        # trials in flight); those not yet seen waiting while a slot was free; the
        # tasks that did (for the run's summary).
        self._held: set[int] = set()
        self._held_unseen: set[int] = set()
        self._waited: dict[int, None] = {}
        self._waits = 0
        #: Set by `stop`: no new trial is admitted (a stop rule held: ``fail_on_error``
        #: exceeded, or ``run_cost_limit`` reached).
        self.stopped = False

        if _fresh(self.phase):
            self._queue_first_rounds()
        else:
            for t in range(tasks):
                for r in range(n):
                    p = self.phase[t * self.rounds + r]
                    if p == Phase.DONE:
                        self.finished += 1
                    elif p == Phase.ENDED:
                        # Resumed: ended but not yet evaluated.
                        self.task_inflight[t] += 1
                        self._push_eval(t, r)
                    elif p == Phase.RUNNING:
                        raise ValueError("a resumed trial cannot start RUNNING")
            for t in range(tasks):
                self._advance(t)
                self._consider(t)
            for queue in self._ready.values():
                queue.sort(self._rank)
        self._building = False

    def _queue_first_rounds(self) -> None:
        """What `_consider` of every task does in a run that starts afresh (no trial
        has started), without a call per task (a fifth of a 40,000-task run's start):
        each task without parents has its first round queued; the others wait for
        their parents, none of which has ended, and no task is held back."""
        phase, n, queued = self.phase, self.rounds, self.task_queued
        parents = self.plan.parents
        if any(parents):
            first = [t for t, of in enumerate(parents) if not of]
            for t in first:
                phase[t * n] = Phase.QUEUED
                queued[t] = 1
        else:  # no task has any (most runs): every task's, a slice at a time
            first = list(range(len(parents)))
            phase[::n] = bytes([Phase.QUEUED]) * len(first)
            queued[:] = [1] * len(first)
        bucket_of = self._bucket
        if len(self._checks) == 1:  # one bucket (no keyed limit tells tasks apart)
            by_bucket = {bucket_of[0]: first} if first else {}
        else:
            by_bucket = {}
            for t in first:
                by_bucket.setdefault(bucket_of[t], []).append(t)
        for bucket, tasks in by_bucket.items():
            # In entry order (the rank, then the task: a stable sort), so the arrays need
            # no sort (a resumed run's are sorted once built).
            tasks.sort(key=self._rank.__getitem__)
            ready = self._ready[bucket] = _Ready()
            ready.tasks = array("l", tasks)
            ready.rounds = array("l", [0]) * len(tasks)  # round 0 each
        self._ready_count += len(first)

    # -- readiness ---------------------------------------------------------

    def _advance(self, t: int) -> None:
        phase, base = self.phase, t * self.rounds
        r = self.next_round[t]
        while r < self.rounds and phase[base + r] != Phase.PENDING:
            r += 1
        self.next_round[t] = r

    def _consider(self, t: int) -> None:
        """Queue what task t may start next, mark what can never run unreachable, and
        note whether the per-task limit holds its next round back."""
        # Nothing to queue once every round has started and none waits parked: most of
        # the three calls a trial makes come then (a one-trial task's all do).
        if self.next_round[t] < self.rounds or self._parked:
            self._queue(t)
        # Cheapest tests first: this runs on every change of every task.
        if self.sequential:
            held = self.task_inflight[t] > 0
        else:
            held = self.task_running[t] >= self.limits.max_parallel_per_task
        if held:
            r = self.next_round[t]  # the lowest pending round (see `_advance`)
            parents = self.plan.parents[t]
            held = (
                r < self.rounds
                and not self.task_queued[t]
                and (
                    not parents
                    or all(self.phase[p * self.rounds + r] >= Phase.ENDED for p in parents)
                )
            )
        if held:
            if t not in self._held:
                self._held.add(t)
                self._held_unseen.add(t)
        elif self._held and t in self._held:
            self._held.discard(t)
            self._held_unseen.discard(t)

    def _queue(self, t: int) -> None:
        """Queue what task t may start next, and mark what can never run unreachable.

        With ``max_parallel_per_task=1`` a task's rounds go strictly in order, each
        after the previous one is done (reflective trials). Otherwise any pending
        round whose parents' same rounds have ended is ready, in round order, as
        many as the task's limit has room for.
        """
        parked = self._parked.get(t)
        per_task = self.limits.max_parallel_per_task
        if parked and self.task_running[t] < per_task:
            self._push_ready(t, parked.pop(0), resumed=True)
            if not parked:
                del self._parked[t]
        if self.sequential:
            r = self.next_round[t]
            if not (self.task_inflight[t] or self.task_queued[t]) and r < self.rounds:
                self._try_round(t, r)
            return
        # At most one queued round per task: when it starts, `next_starts` considers
        # the task again, so the ready queue holds an entry per task, not per trial.
        room = min(per_task - self.task_running[t], 1) - self.task_queued[t]
        phase, base = self.phase, t * self.rounds
        orphan = not self.plan.parents[t]
        for r in range(self.next_round[t], self.rounds):
            if room <= 0 and orphan:
                break  # no round can be queued, and without parents none is unreachable
            # Rounds past the task's room are still looked at: an unreachable one
            # is recorded at once, since it needs no slot.
            if phase[base + r] == Phase.PENDING and self._try_round(t, r, queue=room > 0):
                room -= 1

    def _try_round(self, t: int, r: int, *, queue: bool = True) -> bool:
        """Queue round r of task t if its parents' round r ended (and ``queue``); True if
        it was queued. A round whose parent gave no valid output is marked unreachable."""
        cause = -1
        for p in self.plan.parents[t]:
            if self.phase[p * self.rounds + r] < Phase.ENDED:
                return False
            if self.status[p * self.rounds + r] != _COMPLETED and cause < 0:
                cause = p
        if cause >= 0:
            self.phase[t * self.rounds + r] = Phase.RUNNING
            self.task_inflight[t] += 1
            self._advance(t)
            self._unreachable.append(_start(Start, (StartKind.UNREACHABLE, t, r, cause)))
            return False
        if not queue or self.stopped:
            return False
        self.phase[t * self.rounds + r] = Phase.QUEUED
        self.task_queued[t] += 1
        self._push_ready(t, r, resumed=False)
        return True

    def _push_ready(self, t: int, r: int, *, resumed: bool) -> None:
        queue = self._ready.get(self._bucket[t])
        if queue is None:
            queue = self._ready[self._bucket[t]] = _Ready()
        if self._building and not resumed:  # sorted once admission is built
            queue.tasks.append(t)
            queue.rounds.append(r)
        else:
            # A trial resumed after a rate limit goes ahead of new work of its rank in
            # its bucket (across buckets, the scarcer limit goes first).
            heapq.heappush(queue.heap, (self._rank[t], r, 0 if resumed else 1, t))
        self._ready_count += 1

    def _push_eval(self, t: int, r: int) -> None:
        self._evals.setdefault(self._eval_bucket[t], deque()).append((t, r))
        self._eval_count += 1

    # -- the decision ------------------------------------------------------

    def next_starts(self) -> list[Start]:
        """Everything that may start now; the counters are taken before returning."""
        starts: list[Start] = []
        while self._unreachable:
            starts.append(self._unreachable.popleft())
        limits = self.limits
        total = limits.max_parallel_total
        # Evaluations first: when the total ceiling binds, a waiting evaluation goes first.
        while (
            self._eval_count
            and self.evaluating < limits.max_parallel_evaluations
            and self.executing + self.evaluating < total
        ):
            key = self._best_eval_key()
            if key is None:
                break
            t, r = self._evals[key].popleft()
            if not self._evals[key]:
                del self._evals[key]
            self._eval_count -= 1
            self.evaluating += 1
            for used, i in self._eval_slots[t]:
                used[i] += 1
            starts.append(_start(Start, (StartKind.EVALUATE, t, r, -1)))
        while (
            self._ready_count
            and self.executing < limits.max_parallel
            and self.executing + self.evaluating < total
        ):
            bucket = self._best_bucket()
            if bucket is None:
                break
            queue = self._ready[bucket]
            _, r, fresh, t = queue.pop(self._rank)
            if not (queue.heap or queue.tasks):  # its last (`pop` drops arrays taken whole)
                del self._ready[bucket]
            self._ready_count -= 1
            if fresh:
                self.task_queued[t] -= 1
                if self.task_running[t] >= self.limits.max_parallel_per_task:
                    # A resumed trial took the task's room meanwhile: back to pending.
                    self.phase[t * self.rounds + r] = Phase.PENDING
                    self.next_round[t] = min(self.next_round[t], r)
                    continue
            elif self.task_running[t] >= self.limits.max_parallel_per_task:
                self._parked.setdefault(t, []).append(r)  # its task filled up meanwhile
                continue
            else:
                self._deferred -= 1
            self._take_execution(t, r, fresh=bool(fresh))
            starts.append(_start(Start, (StartKind.EXECUTE, t, r, -1)))
            self._consider(t)  # with max_parallel_per_task > 1 its next round may fit too
        # Unreachable trials found on the way (they hold no slot) are returned at once.
        while self._unreachable:
            starts.append(self._unreachable.popleft())
        if (
            self._held_unseen
            and self.executing < limits.max_parallel
            and self.executing + self.evaluating < total
            and not self.stopped
        ):
            self._count_waits()
        return starts

    def _count_waits(self) -> None:
        """With an execution slot free: count the held rounds that wait for their task
        alone (their model and environment have room), for the run's summary."""
        kept = set()
        for t in self._held_unseen:
            if self._full(self._bucket[t]):
                kept.add(t)
            else:
                self._waits += 1
                self._waited[t] = None
        # A fresh set: a set never shrinks its table, and iterating a sparse one is slow.
        self._held_unseen = kept

    def _best_bucket(self) -> Bucket | None:
        """The bucket whose head goes next: the longest remaining chain first, then the
        scarcest resource (a bucket under a limit of 1 idles its slot while others go
        first, and its work may be what the run waits for), then lower rounds."""
        best: Bucket | None = None
        best_key: tuple[int, int, tuple[int, int, int, int]] | None = None
        ready = self._ready
        if len(ready) == 1:  # the common case: one model and environment, or one left
            for bucket in ready:  # (and most often under no keyed limit: no call)
                return None if self._checks[bucket] and self._full(bucket) else bucket
        for bucket, queue in ready.items():
            if self._full(bucket):
                continue
            head = queue.head(self._rank)
            key = (head[0], self._scarcity[bucket], head)
            if best_key is None or key < best_key:
                best, best_key = bucket, key
        return best

    def _full(self, bucket: Bucket) -> bool:
        """Whether a bucket's keyed limits leave no room (its trials must wait)."""
        for used, cap, i in self._checks[bucket]:
            if used[i] >= cap[i]:
                return True
        return False

    def _best_eval_key(self) -> Bucket | None:
        best = None
        best_head = None
        evals = self._evals
        if len(evals) == 1:  # the common case: no per-environment evaluation limit
            for key in evals:
                return None if self._eval_checks[key] and self._eval_full(key) else key
        for key, queue in evals.items():
            if self._eval_full(key):
                continue
            head = queue[0]
            if (
                best_head is None
                or head[1] < best_head[1]
                or (head[1] == best_head[1] and head[0] < best_head[0])
            ):
                best, best_head = key, head
        return best

    def _eval_full(self, key: Bucket) -> bool:
        for used, cap, i in self._eval_checks[key]:
            if used[i] >= cap[i]:
                return True
        return False

    def _take_execution(self, t: int, r: int, *, fresh: bool) -> None:
        self.executing += 1
        self.task_running[t] += 1
        for used, i in self._slots[t]:
            used[i] += 1
        if fresh:
            self.task_inflight[t] += 1
            self.phase[t * self.rounds + r] = Phase.RUNNING
            self._advance(t)

    def _release_execution(self, t: int) -> None:
        self.executing -= 1
        self.task_running[t] -= 1
        for used, i in self._slots[t]:
            used[i] -= 1

    # -- what the run loop reports back ------------------------------------

    def execution_ended(self, t: int, r: int, status: TrialStatus) -> None:
        """Trial (t, r) has its terminal commit; release its execution counters."""
        self._release_execution(t)
        adaptive = self._adaptive
        if adaptive is not None and (m := adaptive.of[t]) >= 0:
            effective = adaptive.effective
            if effective[m] < adaptive.cap[m]:
                # Additive increase: one more slot after a window of unthrottled ends.
                self._successes[m] += 1
                if self._successes[m] >= effective[m]:
                    self._successes[m] = 0
                    effective[m] += 1
        self._ended(t, r, status)

    def defer(self, t: int, r: int) -> None:
        """Trial (t, r) hit a rate limit: it gives its slots back and waits, still started."""
        self._release_execution(t)
        self._deferred += 1
        self._consider(t)

    def rate_limited(self, t: int) -> None:
        """Multiplicative decrease of the effective limit of task t's model (the
        adaptive keyed limit's key)."""
        adaptive = self._adaptive
        if adaptive is not None and (m := adaptive.of[t]) >= 0:
            effective = adaptive.effective
            effective[m] = max(1, min(effective[m], adaptive.used[m]) // 2)
            self._successes[m] = 0

    def resume_deferred(self, t: int, r: int) -> None:
        """The wait of deferred trial (t, r) is over: it is ready again, ahead of new work."""
        if self.task_running[t] >= self.limits.max_parallel_per_task:
            self._parked.setdefault(t, []).append(r)
        else:
            self._push_ready(t, r, resumed=True)

    def unreachable_recorded(self, t: int, r: int) -> None:
        self._ended(t, r, TrialStatus.UNREACHABLE)

    def _ended(self, t: int, r: int, status: TrialStatus) -> None:
        self.phase[t * self.rounds + r] = Phase.ENDED
        self.status[t * self.rounds + r] = STATUS_CODES[status]
        if status in EVALUATED_STATUSES:
            self._push_eval(t, r)
        else:
            self._done(t, r)
        self._consider(t)
        for child in self.plan.children[t]:
            if self.phase[child * self.rounds + r] == Phase.PENDING:
                self._consider(child)

    def evaluation_ended(self, t: int, r: int) -> None:
        self.evaluating -= 1
        for used, i in self._eval_slots[t]:
            used[i] -= 1
        self._done(t, r)
        self._consider(t)

    def _done(self, t: int, r: int) -> None:
        self.phase[t * self.rounds + r] = Phase.DONE
        self.task_inflight[t] -= 1
        self.finished += 1

    def status_of(self, t: int, r: int) -> TrialStatus | None:
        return STATUS_OF_CODE.get(self.status[t * self.rounds + r])

    def stop(self) -> None:
        """Admit no new trial from now on. Running trials, trials waiting out a rate
        limit and pending evaluations finish; queued trials go back to pending, for a
        later run of the benchmark."""
        if self.stopped:
            return
        self.stopped = True
        for bucket, queue in list(self._ready.items()):
            kept = []
            for entry in queue.entries(self._rank):
                _, r, fresh, t = entry
                if not fresh:  # started already, then deferred by a rate limit
                    kept.append(entry)
                    continue
                self.phase[t * self.rounds + r] = Phase.PENDING
                self.task_queued[t] -= 1
                self._ready_count -= 1
            if kept:
                heapq.heapify(kept)
                self._ready[bucket] = _Ready(kept)
            else:
                del self._ready[bucket]

    @property
    def complete(self) -> bool:
        """Every trial is done, or the run was stopped and what it had started is."""
        if self.finished == self.total:
            return True
        return self.stopped and not (
            self.executing
            or self.evaluating
            or self._eval_count
            or self._deferred
            or self._ready_count
            or self._unreachable
        )

    def statistics(self) -> Statistics:
        in_use = {
            c.limit.statistics: dict(zip(c.names, c.used, strict=True)) for c in self.counters
        }
        adaptive = self._adaptive
        effective = (
            {}
            if adaptive is None
            else {
                adaptive.limit.statistics: dict(
                    zip(adaptive.names, adaptive.effective, strict=True)
                )
            }
        )
        return Statistics(
            executing=self.executing,
            evaluating=self.evaluating,
            ready=self._ready_count,
            awaiting_evaluation=self._eval_count,
            finished=self.finished,
            total=self.total,
            deferred=self._deferred,
            held_by_task=sum(self.rounds - self.next_round[t] for t in self._held),
            task_limit_waits=self._waits,
            task_limit_tasks=tuple(self.plan.task_ids[t] for t in self._waited),
            in_use=in_use,
            effective_caps=effective,
        )


#: The counters of a phase's keyed limits a trial needs (-1: none), in declaration order.
Bucket = tuple[int, ...]

#: A ready execution: (rank, round, 0 if resumed after a rate limit else 1, task).
_Entry = tuple[int, int, int, int]


class _Ready:
    """A bucket's ready executions, taken in `_Entry` order: those queued as admission
    was built (a task's first round each, fresh) kept as two arrays read from a
    cursor (16 bytes an entry, not a tuple and an int: some 100 bytes a task), the
    ones queued later in a heap."""

    __slots__ = ("tasks", "rounds", "at", "heap")

    def __init__(self, heap: list[_Entry] | None = None) -> None:
        self.tasks = array("l")
        self.rounds = array("l")
        self.at = 0
        self.heap: list[_Entry] = heap if heap is not None else []

    def sort(self, rank: Sequence[int]) -> None:
        """Put the arrays in entry order (they are, unless ranks or rounds differ)."""
        tasks, rounds = self.tasks, self.rounds

        def key(i: int) -> tuple[int, int, int]:
            t = tasks[i]
            return rank[t], rounds[i], t

        # Looked at pairwise (a key and the next one's, made in C as the check goes): no
        # key per entry is kept unless they must be sorted.
        keys, later = (
            zip(map(rank.__getitem__, tasks), rounds, tasks, strict=True) for _ in range(2)
        )
        next(later, None)
        if all(map(operator.lt, keys, later)):
            return
        order = sorted(range(len(tasks)), key=key)
        self.tasks = array("l", [tasks[i] for i in order])
        self.rounds = array("l", [rounds[i] for i in order])

    def _fresh(self, rank: Sequence[int]) -> _Entry | None:
        """The arrays' next entry if it goes before the heap's (None: the heap's goes)."""
        at, heap = self.at, self.heap
        if at < len(self.tasks):
            t = self.tasks[at]
            entry = (rank[t], self.rounds[at], 1, t)
            if not heap or entry < heap[0]:
                return entry
        return None

    def head(self, rank: Sequence[int]) -> _Entry:
        return self._fresh(rank) or self.heap[0]

    def pop(self, rank: Sequence[int]) -> _Entry:
        entry = self._fresh(rank)
        if entry is None:
            return heapq.heappop(self.heap)
        self.at += 1
        if self.at == len(self.tasks):  # every one taken: the arrays go
            self.tasks, self.rounds, self.at = array("l"), array("l"), 0
        return entry

    def entries(self, rank: Sequence[int]) -> list[_Entry]:
        """Every entry, in no particular order."""
        tasks, rounds = self.tasks, self.rounds
        fresh = [(rank[tasks[i]], rounds[i], 1, tasks[i]) for i in range(self.at, len(tasks))]
        return fresh + self.heap


def _buckets(counters: list[KeyedCounter], tasks: int) -> tuple[list[Bucket], list[Bucket]]:
    """Each task's bucket under ``counters``, and the distinct ones (in order of first use)."""
    if not any(c.names for c in counters):
        # No task is under any of them (most runs, whose limits name no key): one
        # bucket, made at once.
        only = (-1,) * len(counters)
        return [only] * tasks, [only] if tasks else []
    # Most tasks share their bucket: one tuple each, not one per task.
    one: dict[Bucket, Bucket] = {}
    of = [one.setdefault(b, b) for b in zip(*[c.of for c in counters], strict=True)]
    return of, list(one)


def _slots(
    counters: list[KeyedCounter], of: list[Bucket], buckets: list[Bucket]
) -> list[tuple[tuple[list[int], int], ...]]:
    """Each task's slots under ``counters`` (its bucket's, of the distinct ``buckets``):
    (the counter's in-use array, its index)."""
    of_bucket = {
        bucket: tuple([(c.used, i) for c, i in zip(counters, bucket, strict=True) if i >= 0])
        for bucket in buckets
    }
    if len(of_bucket) == 1:  # every task's the same: no look-up per task
        return [*of_bucket.values()] * len(of)
    return [of_bucket[bucket] for bucket in of]


def _checks(
    counters: list[KeyedCounter], bucket: Bucket
) -> tuple[tuple[list[int], list[int], int], ...]:
    """What a bucket needs room in: (in use, effective cap, index) per limited key."""
    return tuple(
        [(c.used, c.effective, i) for c, i in zip(counters, bucket, strict=True) if i >= 0]
    )
