"""The coordinator's side of the Ray executor: admitted jobs out in batches, results in.

A slot is freed only when the coordinator knows the work ended: its result
arrived, or its host is confirmed dead (Ray says so); then its running trials
go to a new host and continue from their heads (``may_have_history``). A host Ray
only cannot reach for the moment (``ActorUnavailableError``) may still be running
and writing its trials: it is not replaced, and what could not reach it (or whose
answer was lost on the way back) is sent again, unchanged, until it answers or Ray
says it died. A host runs each batch once and answers a poll sent again with the
answer it gave the first time (`HostActor.exchange`, `HostActor.submit`).

A host tells of its durable commits with its next answer, so those it made
since its last one die with it: before its trials go on elsewhere, the
coordinator reads them back from the store and tells the observers (and the
run's spend) of every commit past the last one it heard of.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from .._concurrency import ScopeStatistics
from .._errors import CorralError
from ..runtime._jobs import Evaluated, Executed, Job, Postponed, Result, TrialJob
from ..store._protocol import SharedStore, TrialKey
from ._host import Failed, HostActor, HostSpec, Notice
from ._logs import plain
from ._owner import UNREACHABLE_AGAIN, actor_class, import_ray, unreachable_errors
from ._protocol import RunContext
from ._scopes import HostId, hub, hub_died
from ._wire import dumps, loads

#: Concurrent calls a host serves: serve, submit, exchange, close or cancel, pid.
_HOST_CALLS = 16
#: Seconds every host together has to confirm its end (`RayExecution._stop`) before it
#: is killed: a host that never answers (pending placement, frozen) is not waited on
#: once per host.
STOP_WAIT = 60.0
#: Seconds between two readings of the hub's scopes for the observers.
_SCOPES_EVERY = 0.5
_log = logging.getLogger("corral")


class _Again:
    """A separate `HostActor.submit` that could not reach its host, to be sent again."""

    __slots__ = ("number", "batch")

    def __init__(self, number: int, batch: bytes) -> None:
        self.number, self.batch = number, batch


class _LostServe:
    """A host's `HostActor.serve` that could not reach it, to be sent again (a host that
    never serves is never ready: its polls would wait for good)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class _Host:
    """The coordinator's view of one host: its actor, its poll, the jobs it runs."""

    __slots__ = (
        "actor",
        "index",
        "jobs",
        "outbox",
        "poll",
        "polled",
        "sent",
        "serving",
        "attempt",
    )

    def __init__(self, actor: Any, index: int) -> None:
        self.actor = actor
        self.index = index
        self.jobs: dict[tuple[int, int], Job] = {}
        #: Jobs to send, and (t, r) pairs of records it may drop (see `_jobs`).
        self.outbox: list[Job | tuple[int, int]] = []
        #: Its `HostActor.serve` call (sent by `RayExecution._send_serve`).
        self.serving: Any = None
        #: The outstanding `HostActor.exchange` (None: to be sent with the next batch).
        self.poll: Any = None
        #: The latest poll's round and batch (sent again as they were, if it is lost).
        self.polled: tuple[int, bytes] = (0, b"")
        #: The latest poll's calls sent so far: the host waits only on the highest.
        self.attempt = 0
        #: Separate submits sent so far (each numbered, so the host runs it once).
        self.sent = 0


class RayExecution:
    """A run's `Execution` on Ray hosts (see `RayExecutor`): ``hosts`` host actors, each
    running up to ``trials_per_host`` jobs (None: what admission gives it)."""

    def __init__(
        self,
        spec: HostSpec,
        run: RunContext,
        *,
        hosts: int,
        trials_per_host: int | None,
        max_host_restarts: int,
        host_options: Mapping[str, Any],
    ) -> None:
        self.ray = import_ray()
        self._unreachable = unreachable_errors(self.ray)
        #: Dead hosts whose `_forget` did not get through to the hub (yet).
        self._unforgotten: set[HostId] = set()
        self.hosts_wanted = hosts
        self.trials_per_host = trials_per_host
        self.max_host_restarts = max_host_restarts
        self._store, self._acks = run.store, run.acks
        self._deliver, self._evaluation = run.deliver, run.evaluation
        self._benchmark_id = spec.work.benchmark_id
        #: The registry's hub: taken as the hosts start (`start`), given back as the run
        #: ends (`_stop`), whatever ends it ("": not taken, as by a run that failed first).
        self._hub_name = ""
        self._run_id = spec.run
        #: The run's `ConcurrencyScopes`: its hub (`take_hub`), given back at the end.
        self._registry = run.scopes
        self._spec = self.ray.cloudpickle.dumps(spec)
        own = {"max_restarts": 0, "max_task_retries": 0, "max_concurrency": _HOST_CALLS}
        self._actor_class = actor_class(self.ray, HostActor, {**own, **host_options})
        self.hosts: list[_Host] = []
        self._made = 0
        self._restarts = 0
        self._busy = 0
        #: The host each trial to be evaluated ran on (it kept the trial's record).
        self._ran_on: dict[tuple[int, int], _Host] = {}
        self._closing = False
        self._wakeup = anyio.Event()
        #: Hosts' answers as they arrive (appended by Ray's thread): (host, answer).
        self._answers: deque[tuple[_Host, Any]] = deque()
        self._call_soon: Callable[[Callable[[], None]], object] = _unset
        #: The named scopes as the run's hub last reported them (for observers such as
        #: the live display; final once the run is over).
        self._scope_statistics: dict[str, ScopeStatistics] = {}
        self._scopes_final = False
        #: Ray's thread (periodic readings) and `_stop`'s (the final one) both write them.
        self._scopes_lock = threading.Lock()
        #: Set (on Ray's thread) when the hub is found dead: `_watch_scopes` stops the run.
        self._hub_lost: BaseException | None = None
        self._observed = spec.work.observed
        #: Hosts (by index) whose calls are being sent again (out of Ray's reach).
        self._unreached: set[int] = set()
        #: With observers: the sequence number past the last commit they heard of, for
        #: each trial a host runs or evaluates, by (task id, trial).
        self._heard: dict[tuple[str, int], int] = {}
        self._tg: anyio.abc.TaskGroup | None = None

    @property
    def busy(self) -> int:
        return self._busy

    def _new_host(self) -> _Host:
        actor = self._actor_class.remote(self._spec, self._made, self._hub_name)
        self._made += 1
        host = _Host(actor, self._made - 1)
        self.hosts.append(host)
        self._send_serve(host)
        return host

    def _send_serve(self, host: _Host) -> None:
        """Send ``host`` its `serve` call (again, when Ray could not deliver it: the host
        runs one, and answers one sent again at once)."""
        host.serving = host.actor.serve.remote()
        host.serving.future().add_done_callback(functools.partial(self._served, host))

    def _served(self, host: _Host, future: Any) -> None:
        """(On Ray's thread) a `serve` that did not get through goes again; its other
        ends (the host's failure, its death) reach the run through its poll."""
        try:
            error = future.exception()
        except BaseException:  # cancelled: the run is over
            return
        if isinstance(error, self._unreachable):
            self._arrived(host, _LostServe(error))

    # -- out ---------------------------------------------------------------

    def scope_statistics(self) -> Mapping[str, ScopeStatistics]:
        return self._scope_statistics

    def dropped(self) -> Sequence[Job]:
        """None here: a job sent to a host is the host's (a host's pool keeps its own)."""
        return ()

    def submit_all(self, jobs: Sequence[Job]) -> None:
        # Evaluations placed first, whatever the run's order (trials first, for the
        # local pool): each goes to the host that kept its record while it has room.
        for job in jobs:
            if not isinstance(job, TrialJob):
                self.submit(job)
        for job in jobs:
            if isinstance(job, TrialJob):
                self.submit(job)
        self.flush()

    def submit(self, job: Job) -> None:
        t, r = job.t, job.r
        if isinstance(job, TrialJob):
            if self._observed and (job.task_id, r) not in self._heard:  # not deferred
                self._heard[(job.task_id, r)] = job.head
        else:
            if self._observed:
                self._heard[(job.task_id, r)] = job.seq
            ran_on = self._ran_on.pop((t, r), None)
            if ran_on is not None:
                cap = self.trials_per_host
                if ran_on in self.hosts and (cap is None or len(ran_on.jobs) < cap):
                    self._place(job, ran_on)  # it kept the record
                    return
                if ran_on in self.hosts:  # the host that kept the record drops it
                    ran_on.outbox.append((t, r))
        self._place(job)

    def _place(self, job: Job, host: _Host | None = None) -> None:
        if host is None:
            hosts = self.hosts
            host = hosts[0] if len(hosts) == 1 else choose(hosts, self.trials_per_host)
        host.jobs[(job.t, job.r)] = job
        host.outbox.append(job)
        self._busy += 1

    def flush(self) -> None:
        for host in self.hosts:
            if host.poll is None:  # it answered: its next jobs go with the next long poll
                self._poll(host, dumps(host.outbox))
                host.outbox = []
            elif host.outbox:
                host.sent += 1
                self._submit(host, _Again(host.sent, dumps(host.outbox)))
                host.outbox = []
        self._wakeup.set()

    def close(self) -> None:
        self._closing = True
        self._wakeup.set()

    # -- in ----------------------------------------------------------------

    def start(self, tg: anyio.abc.TaskGroup) -> None:
        self._call_soon = thread_caller()
        tg.start_soon(self._run)  # first: whatever fails below, `_stop` gives the hub back
        # The registry's hub, shared by every execution using it at once; this one's
        # hosts are told apart there by the run's own id.
        self._hub_name = self._registry.take_hub()
        for _ in range(self.hosts_wanted):
            self._new_host()

    async def _run(self) -> None:
        cancelled = True
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._watch_scopes)
                await self._serve()
                tg.cancel_scope.cancel()
            cancelled = False
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self._stop, cancelled)

    async def _serve(self) -> None:
        answers = self._answers
        while not self._closing:
            if not answers:  # a host answers, or everything waits out a rate limit
                await self._wakeup.wait()
                self._wakeup = anyio.Event()
                continue
            results: list[Result] = []
            while answers:
                host, answer = answers.popleft()
                if host in self.hosts:  # not one replaced meanwhile
                    self._answer(host, answer, results)
            self._deliver(results)  # the run loop admits once for the whole batch

    async def _watch_scopes(self) -> None:
        """Keep `scope_statistics` fresh for the observers, and stop the run once the hub
        is dead: ask it twice a second (without waiting for its answer; none until a
        host has made it). A host stops the run when its agents find the hub dead; this
        stops a run whose agents hold their slots, or never ask again, as well (and one
        where a host would make a new, empty hub)."""
        hub_handle = None
        while True:
            await anyio.sleep(_SCOPES_EVERY)
            if hub_handle is None:  # a lookup in Ray's GCS: not on the run loop's thread
                hub_handle = await anyio.to_thread.run_sync(self._find_hub)
                if hub_handle is None:
                    continue
            if self._hub_lost is not None:
                raise hub_died(self._hub_name, self._hub_lost)
            self._forget_again(hub_handle)
            hub_handle.statistics.remote().future().add_done_callback(self._got_scopes)

    def _forget(self, scopes: Any, index: HostId) -> None:
        """Tell the hub host ``index`` died (its slots come back); a call Ray could not
        deliver for now goes again with the next reading of the hub (`_forget_again`)."""

        def done(future: Any) -> None:  # on Ray's thread
            if isinstance(future.exception(), self._unreachable):
                self._unforgotten.add(index)

        scopes.forget.remote(index).future().add_done_callback(done)

    def _forget_again(self, scopes: Any) -> None:
        """Send again each `_forget` that did not get through."""
        while self._unforgotten:
            self._forget(scopes, self._unforgotten.pop())

    def _find_hub(self) -> Any:
        return hub(self._hub_name, create=False)

    def _got_scopes(self, future: Any) -> None:
        """(On Ray's thread) the hub's answer: its scopes, or that it is dead."""
        error = future.exception()
        if error is None:
            # An answer that arrives after the final reading (`_stop`) is older than it.
            self._read_scopes(future.result(), final=False)
        elif isinstance(error, self.ray.exceptions.RayActorError) and not isinstance(
            error,
            self._unreachable,  # only for now: the next reading asks again
        ):
            self._hub_lost = error

    def _read_scopes(self, statistics: dict[str, ScopeStatistics], *, final: bool) -> None:
        with self._scopes_lock:
            if not self._scopes_final:
                self._scope_statistics = statistics
                self._scopes_final = final
                self._registry.hosted(statistics)

    def _poll(self, host: _Host, jobs: bytes) -> None:
        """Send ``host`` its next long poll, with ``jobs``."""
        host.polled = (host.polled[0] + 1, jobs)
        host.attempt = 0
        self._poll_again(host)

    def _poll_again(self, host: _Host) -> None:
        """Send ``host`` its latest long poll (again, as it was, when it did not get
        through); its answer wakes the run loop (from Ray's thread, which also unpickles
        it, so the loop has no thread to hop to and back)."""
        host.attempt += 1
        host.poll = host.actor.exchange.remote(*host.polled, host.attempt)
        evaluation = self._evaluation

        def arrived(future: Any) -> None:
            try:
                answer = loads(future.result(), evaluation)
            except Exception as exc:
                answer = exc
            self._arrived(host, answer)

        host.poll.future().add_done_callback(arrived)

    def _submit(self, host: _Host, submit: _Again) -> None:
        sent = host.actor.submit.remote(submit.number, submit.batch)
        sent.future().add_done_callback(functools.partial(self._submitted, host, submit))

    def _submitted(self, host: _Host, submit: _Again, future: Any) -> None:
        """A separate `submit` that failed (its jobs unreadable on the host, say) is an
        answer as a failed poll's is (its batch is lost: the run ends, or its host is
        replaced), unless it could not reach the host (sent again); a submit that worked
        says nothing."""
        try:
            error = future.exception()
        except BaseException as exc:  # cancelled: no answer will come
            error = exc
        if error is not None:
            self._arrived(host, submit if isinstance(error, self._unreachable) else error)

    def _arrived(self, host: _Host, answer: Any) -> None:
        """(On Ray's thread) hand ``answer`` to the run loop and wake it."""
        self._answers.append((host, answer))
        try:
            self._call_soon(self._wake)
        except RuntimeError:  # the run is over (its loop closed): nobody waits
            pass

    def _wake(self) -> None:
        self._wakeup.set()

    def _answer(self, host: _Host, answer: Any, results: list[Result]) -> None:
        if type(answer) is _Again:  # a submit that did not reach its host
            self._later(host, functools.partial(self._submit, host, answer), answer)
            return
        if type(answer) is _LostServe:  # its serve call may not have reached it
            self._later(host, functools.partial(self._send_serve, host), answer.error)
            return
        if isinstance(answer, BaseException):
            if isinstance(answer, self._unreachable):
                # It may be running still (a network partition): the poll goes again.
                self._later(host, functools.partial(self._poll_again, host), answer)
                return
            if isinstance(answer, self.ray.exceptions.RayActorError):
                self._replace(host, answer)
                return
            if isinstance(answer, self.ray.exceptions.RayTaskError):
                # The host's own error, without Ray's wrapping (a traceback in colour).
                raise answer.cause
            raise answer
        done, notices = answer
        host.poll = None
        self._unreached.discard(host.index)
        if notices:
            self._tell(notices)
        for result in done:
            self._finish(host, result, results)

    def _finish(self, host: _Host, result: Result | Failed, results: list[Result]) -> None:
        if type(result) is Failed:
            raise result.error
        if type(result) is Postponed:
            t, r = result.job.t, result.job.r
        else:
            assert type(result) is Executed or type(result) is Evaluated
            t, r = result.t, result.r
        job = host.jobs.pop((t, r))
        self._busy -= 1
        if self._observed and type(result) is not Postponed:  # a deferred trial goes on later
            del self._heard[(job.task_id, r)]
        if type(result) is Executed and result.record is None:
            self._ran_on[(t, r)] = host  # it kept the record for the evaluation
        results.append(result)

    def _later(self, host: _Host, send: Callable[[], None], why: object) -> None:
        """``send`` a call again once `UNREACHABLE_AGAIN` has passed, unless ``host``
        was replaced meanwhile (Ray said it died); the first time a host is out of
        reach (again), say so."""
        if host.index not in self._unreached:
            self._unreached.add(host.index)
            _log.warning(
                "Ray host %d cannot be reached for now (%s); its calls are sent again "
                "every %g s until it answers or Ray says it died",
                host.index,
                plain(why) if isinstance(why, BaseException) else "a submit did not get through",
                UNREACHABLE_AGAIN,
            )

        async def again() -> None:
            await anyio.sleep(UNREACHABLE_AGAIN)
            if host in self.hosts and not self._closing:
                send()

        assert self._tg is not None
        self._tg.start_soon(again)

    def _tell(self, notices: list[Notice]) -> None:
        benchmark_id = self._benchmark_id
        durable, heard = self._acks.durable, self._heard
        for task_id, trial, commits in notices:
            heard[(task_id, trial)] = commits[-1].seq + 1
            durable(TrialKey(benchmark_id, task_id, trial), commits)

    def _replace(self, dead: _Host, error: BaseException) -> None:
        """``dead``'s actor is gone (Ray says so): its work continues on a new host."""
        if getattr(error, "actor_init_failed", False):  # a new host would fail the same way
            raise CorralError(f"a Ray host could not start: {plain(error)}") from error
        self._restarts += 1
        if self._restarts > self.max_host_restarts:
            raise CorralError(
                f"Ray hosts died {self._restarts} times in this run (more than "
                f"max_host_restarts={self.max_host_restarts}); the last: {plain(error)}"
            ) from error
        self.hosts.remove(dead)
        scopes = hub(self._hub_name, create=False)
        if scopes is not None:
            self._forget(scopes, (self._run_id, dead.index))
        self.ray.kill(dead.actor)
        self._new_host()
        jobs = list(dead.jobs.values())
        dead.jobs.clear()
        for job in jobs:
            # It may have recorded steps (or ended) before it died: go on from its head.
            job.may_have_history = True
        if jobs:
            assert self._tg is not None
            self._tg.start_soon(self._fence_and_resend, dead.index, jobs)
        else:
            self.flush()  # the new host's first poll

    async def _fence_and_resend(self, dead: int, jobs: list[Job]) -> None:
        """Fence the ``dead`` host off the store (Ray said it died, but a host on a node
        cut off from the cluster may live on a while, and write), tell of its ``jobs``'
        commits nobody heard of, then send the jobs on."""
        store = self._store
        if isinstance(store, SharedStore):
            await store.fence_host(self._benchmark_id, dead)
        if self._observed:
            await self._read_back(jobs)
        self._resend(jobs)
        self._deliver(())  # a commit read back may have stopped admission (run_cost_limit)

    async def _read_back(self, jobs: list[Job]) -> None:
        """Tell of the commits of a dead host's ``jobs`` nobody heard of (read from the
        store, which fenced the host off: nothing writes them meanwhile)."""
        for job in jobs:
            key = TrialKey(self._benchmark_id, job.task_id, job.r)
            heard = self._heard[(job.task_id, job.r)]
            unheard = [c for c in await self._store.history(key) if c.seq >= heard]
            if unheard:
                self._tell([(job.task_id, job.r, unheard)])

    def _resend(self, jobs: list[Job]) -> None:
        for job in jobs:
            self._busy -= 1
            self._place(job)
        self.flush()

    def _stop(self, cancelled: bool) -> None:
        """End every host (cancelling what runs) and wait until each confirms."""
        ray = self.ray
        calls = [(h.actor.cancel if cancelled else h.actor.close).remote() for h in self.hosts]
        if calls:  # one deadline for them all: hosts that never answer cost it once, not each
            ray.wait(calls, num_returns=len(calls), timeout=STOP_WAIT)
        for host in self.hosts:
            ray.kill(host.actor)
        if not self._hub_name:  # it failed before it took one
            return
        scopes = hub(self._hub_name, create=False)
        if scopes is not None:
            try:  # what its hosts held comes back; then, for `on_run_end`, the scopes
                ray.get(scopes.end.remote(self._run_id), timeout=60)
                self._read_scopes(ray.get(scopes.statistics.remote(), timeout=60), final=True)
            except Exception:  # noqa: S110 - a dead hub has nothing more to say
                pass
        # The last run using the hub ends it (none made: no host of any run using it
        # is left to make it, and the next run gets a new one).
        if self._registry.give_back_hub() and scopes is not None:
            ray.kill(scopes)


def choose(hosts: list[_Host], cap: int | None) -> _Host:
    """The host for the next job: the least loaded of those that answered (their next
    jobs go with the long poll `RayExecution.flush` sends them anyway; a separate `submit`
    costs a Ray call), unless another is lighter by more than a quarter of its load, or
    it holds ``cap`` jobs (``trials_per_host``) already."""
    lightest = min(hosts, key=_load)
    answered = [host for host in hosts if host.poll is None]
    if not answered:
        return lightest
    host = min(answered, key=_load)
    load, least = len(host.jobs), len(lightest.jobs)
    if (cap is None or load < cap) and load <= least + max(1, least // 4):
        return host
    return lightest


def _load(host: _Host) -> int:
    return len(host.jobs)


def thread_caller() -> Callable[[Callable[[], None]], object]:
    """Schedules a callable on the running event loop from any thread, without waiting
    (asyncio's ``call_soon_threadsafe``, trio's ``run_sync_soon``)."""
    native: Any = anyio.lowlevel.current_token().native_token
    call = getattr(native, "call_soon_threadsafe", None)
    return call if call is not None else native.run_sync_soon  # type: ignore[no-any-return]


def _unset(fn: Callable[[], None]) -> object:
    raise AssertionError("RayExecution.run has not started")
