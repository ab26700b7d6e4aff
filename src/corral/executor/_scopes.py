"""`corral.concurrency` scopes across hosts: one small Ray actor holds every scope.

A host's registry (`SharedScopes`) hands out proxies whose ``acquire`` asks the
hub for a slot and whose ``release`` gives it back, so a scope bounds its
resource across all hosts of the run, not per host. The subprocess bound stays
per host: it is about that machine's CPUs (the run's ``max_subprocesses`` on each
host, else each host's own CPUs).

The hub is made by the first host that uses a named scope (a named actor, one
per `ConcurrencyScopes`: runs given the same registry at once share it, and so
each scope's limit), so a run without scopes starts no process for it. It is
detached, so it outlives that host if the host dies; the coordinator of the last
run using it kills it as that run ends, once the run's hosts are gone (`end`)
(a coordinator killed with -9 on a long-lived cluster leaves it behind: it holds
no resources, ``ray list actors`` shows it as ``corral-scopes-...``). It lives in Ray
namespace `NAMESPACE`: a detached actor in the job's anonymous one made Ray's GCS print
a warning to the terminal, past Corral's log file.

A slot is named by a token ((run, host), number): a waiter cancelled on its host
abandons its token, and the hub gives back a slot it granted meanwhile; when a
host dies, the coordinator tells the hub to forget every token of that host. A call
Ray cannot deliver for the moment (``ActorUnavailableError``: the hub may have run
it) goes again under the same token every second until the hub answers: the hub
grants a token at most once, and nothing to a token whose slot is over.

Every call runs on the hub's one event loop (no concurrency groups: those run on
threads of their own, and a release must wake its waiter on the waiter's loop). An
async actor runs at most ``max_concurrency`` calls at once and queues the rest, a
release among them: the bound is set far above any run's waiting acquires
(`MAX_CALLS`), or a thousand waiters would keep the release that frees one from
ever running.

If the hub dies, who holds what is lost with it, and a new hub could not keep
the limits: that is the run's failure, not the agents'. An agent that asks
the dead hub for a slot never hears back; its host stops the run instead
(`SharedScopes.lost`), and a rerun resumes it. The coordinator asks the hub
twice a second, too, and stops the run once it finds it dead: a run whose agents
hold their slots (or never ask again) stops as well, and a host that would make
a new, empty hub (it finds none by that name) cannot keep it going.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
from collections.abc import Callable
from typing import Any

import anyio

from .._concurrency import SUBPROCESSES, ConcurrencyScope, ConcurrencyScopes, ScopeStatistics
from .._errors import CorralError
from ._logs import plain
from ._numbers import Numbers
from ._owner import UNREACHABLE_AGAIN, actor_class, import_ray, unreachable_errors

#: A host of one run: (the run's id, the host's index).
HostId = tuple[str, int]
Token = tuple[HostId, int]
#: The Ray namespace of the scope hubs (named actors; each name holds a random id).
NAMESPACE = "corral"
#: Seconds a stopping host waits for the releases it sent to reach a hub out of reach.
SETTLE_LIMIT = 10.0
_log = logging.getLogger("corral")

#: Calls the hub runs at once: waiting acquires hold their places (Ray's default for an
#: async actor, 1,000, deadlocked a run with as many trials waiting for a scope).
MAX_CALLS = 1_000_000


class HostForgotten(CorralError):
    """The hub's answer to a host it was told died (`ScopeHub.forget`)."""


class ScopeHub:
    """The scopes of one registry, served to every host of the runs using it (a Ray
    async actor).

    Every call about a token may come more than once: a host Ray could not reach the
    hub from for a moment sends it again, not knowing whether the first one ran. An
    acquire asked again is answered as the first one is (the slot granted once), and
    one that comes after its token's slot was given back (released or abandoned)
    grants nothing."""

    def __init__(self, maker: int) -> None:
        #: The process id of the host that made it (it outlives that host).
        self.maker_pid = maker
        self._scopes = ConcurrencyScopes(max_subprocesses=1)
        self._held: dict[Token, ConcurrencyScope] = {}
        self._waiting: dict[Token, asyncio.Task[Any]] = {}
        #: By host: the tokens whose acquire (or abandon) has come. A token seen that is
        #: neither held nor waiting is over: an acquire of it, come late or again,
        #: grants nothing. Tokens come soon after their host makes them, so what this
        #: keeps beside its low-water mark is the calls in flight, however long a slot
        #: is held.
        self._seen: dict[HostId, Numbers] = {}
        self._dead: set[HostId] = set()

    async def acquire(self, name: str, limit: int, token: Token) -> None:
        scope = self._scopes.scope(name, limit)  # ConfigError reaches the caller
        if token in self._held:  # asked again: the answer to the first call was lost
            return
        first = self._waiting.get(token)
        if first is not None:  # asked again while the first call waits: its answer
            await asyncio.wait({first})
            return
        host, number = token
        if host in self._dead:
            # Ray said it died, yet it asks: it lives on, cut off (its agents would take
            # a return for a grant, beside the slots the live hosts hold). It stops.
            raise HostForgotten(f"Ray host {host} was declared dead: the scope hub forgot it")
        if not self._seen_of(host).add(number):
            return  # over (given back, abandoned): nobody waits for this answer
        task = asyncio.current_task()
        assert task is not None
        self._waiting[token] = task
        try:
            await scope.acquire()
        finally:
            del self._waiting[token]
        self._held[token] = scope

    def release(self, token: Token) -> None:
        scope = self._held.pop(token, None)
        if scope is not None:
            scope.release()

    def abandon(self, token: Token) -> None:
        """The caller of ``acquire(token)`` was cancelled: give back what it got (and
        grant nothing to its acquire if that has not come yet)."""
        if token[0] in self._dead:
            return
        self._seen_of(token[0]).add(token[1])
        self.release(token)
        waiting = self._waiting.get(token)
        if waiting is not None:
            waiting.cancel()

    def _seen_of(self, host: HostId) -> Numbers:
        seen = self._seen.get(host)
        if seen is None:
            seen = self._seen[host] = Numbers(first=0)
        return seen

    def forget(self, host: HostId) -> None:
        """``host`` is dead: its slots come back and its waiters stop waiting."""
        self._dead.add(host)
        for token in [t for t in self._held if t[0] == host]:
            self.release(token)
        for token, task in list(self._waiting.items()):
            if token[0] == host:
                task.cancel()
        self._seen.pop(host, None)  # its tokens are refused as a dead host's

    def end(self, run: str) -> None:
        """``run`` is over, its hosts gone: `forget` each (a host that stopped before it
        gave back what it held, killed at the run's end, leaves no slot taken for the
        other runs sharing this hub)."""
        tokens = [*self._held, *self._waiting]
        hosts = {token[0] for token in tokens} | set(self._seen)
        for host in hosts:
            if host[0] == run:
                self.forget(host)

    def statistics(self) -> dict[str, ScopeStatistics]:
        """Every scope's limit, holders, waiters and peak across the hosts, by name."""
        return self._scopes.statistics()

    def maker(self) -> int:
        return self.maker_pid

    def peaks(self) -> dict[str, int]:
        """The most holders each scope ever had at once (for tests and benchmarks)."""
        return {name: s.peak for name, s in self._scopes.statistics().items()}


def hub(name: str, *, create: bool) -> Any:
    """The run's hub (made if ``create``), or None if no host has made it."""
    import ray

    if not create:
        try:
            return ray.get_actor(name, namespace=NAMESPACE)
        except ValueError:
            return None
    # Detached: it would otherwise die with the host that made it (its owner), and every
    # scope's holders with it; the coordinator kills it when the run ends.
    options = {
        "name": name,
        "namespace": NAMESPACE,
        "get_if_exists": True,
        "lifetime": "detached",
        "num_cpus": 0,
        "max_concurrency": MAX_CALLS,
    }
    return actor_class(ray, ScopeHub, options).remote(os.getpid())


def hub_died(name: str, error: BaseException) -> CorralError:
    """The run's failure once its hub (the Ray actor ``name``) is found dead."""
    return CorralError(
        f"the run's concurrency scope hub (Ray actor {name}) died: "
        f"{type(error).__name__}; the run stopped, and no trial was recorded as an "
        "error for it: run the benchmark again to resume"
    )


class SharedScopes(ConcurrencyScopes):
    """A host's registry: named scopes live in the hub, the subprocess bound here.

    A call Ray cannot deliver to the hub for the moment (``ActorUnavailableError``:
    a partition, a node not yet declared dead) goes again every ``again`` seconds
    under its token until the hub answers; only a hub Ray says died stops the run."""

    def __init__(
        self,
        hub_name: str,
        host: HostId,
        lost: Callable[[BaseException], None],
        again: float = UNREACHABLE_AGAIN,
        *,
        max_subprocesses: int | None = None,
    ) -> None:
        super().__init__(max_subprocesses=max_subprocesses)  # the run's, else this host's CPUs
        self._hub_name = hub_name
        #: Called when the hub is found dead (the host stops every job).
        self.lost = lost
        self.again = again
        self._hub_handle: Any = None
        self._host = host
        self._tokens = itertools.count()
        self._remote: dict[tuple[str, int], _RemoteScope] = {}
        #: Releases and abandons sent to the hub and not yet done there.
        self._sent: set[asyncio.Task[None]] = set()
        self._unreachable: tuple[type[BaseException], ...] | None = None
        #: Whether the hub is out of reach (said once an outage).
        self._out_of_reach = False

    def _get(self, name: str, limit: int) -> ConcurrencyScope:
        if name == SUBPROCESSES:
            return super()._get(name, limit)
        # One scope object per (name, limit): the hub checks the limit against every
        # host's use of the name (a use with another limit is that use's ConfigError),
        # and a trial holding a slot releases it through the object it acquired it with.
        found = self._remote.get((name, limit))
        if found is None:
            found = self._remote[(name, limit)] = _RemoteScope(self, name, limit)
        return found

    @property
    def _hub(self) -> Any:
        if self._hub_handle is None:
            self._hub_handle = hub(self._hub_name, create=True)
        return self._hub_handle

    def token(self) -> Token:
        return (self._host, next(self._tokens))

    async def call(self, method: str, *args: Any) -> None:
        """Call the hub's ``method`` until it answers: sent again while Ray cannot reach
        the hub; `RayActorError` once Ray says it died; what the hub raised (a scope
        used with another limit: `ConfigError`) as itself, not in Ray's wrapping."""
        ray = import_ray()
        if self._unreachable is None:
            self._unreachable = unreachable_errors(ray)
        while True:
            try:
                await getattr(self._hub, method).remote(*args)
            except ray.exceptions.RayTaskError as exc:
                # The hub's own error (a traceback in terminal colours around it).
                raise exc.cause from None
            except self._unreachable as exc:
                if not self._out_of_reach:
                    self._out_of_reach = True
                    _log.warning(
                        "host %s cannot reach the run's scope hub for now (%s); its calls "
                        "go again every %g s until it answers or Ray says it died",
                        self._host,
                        plain(exc),
                        self.again,
                    )
                await anyio.sleep(self.again)
                continue
            self._out_of_reach = False
            return

    def send(self, method: str, token: Token, loop: asyncio.AbstractEventLoop) -> None:
        """`call` the hub's ``method`` (a release, an abandon) for ``token`` without
        waiting, on ``loop`` (the host's: see `loop`); kept track of until it is done."""
        task = loop.create_task(self._sent_call(method, token))
        self._sent.add(task)
        task.add_done_callback(self._sent.discard)

    @staticmethod
    def loop() -> asyncio.AbstractEventLoop:
        """The host's event loop, which the caller runs on (or a clear error)."""
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            raise RuntimeError(
                "a concurrency scope of a Ray host was released outside the host's event loop"
            ) from None

    async def _sent_call(self, method: str, token: Token) -> None:
        try:
            await self.call(method, token)
        except Exception:  # noqa: S110 - a hub that failed holds nothing to report
            pass  # (the coordinator finds it dead and stops the run)

    async def settle(self, limit: float = SETTLE_LIMIT) -> None:
        """Return once the hub has done every release and abandon sent so far (so
        what it reports after this host stopped is what the run left), or after
        ``limit`` seconds of a hub out of reach: what is still being sent is dropped
        (a host settles as it stops, at the run's end, which kills the hub)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while self._sent:
            left = deadline - loop.time()
            if left <= 0:
                for task in self._sent:
                    task.cancel()
                return
            await asyncio.wait(list(self._sent), timeout=left)


class _RemoteScope(ConcurrencyScope):
    """A scope whose slots the hub grants."""

    __slots__ = ("_registry", "_tokens")

    def __init__(self, registry: SharedScopes, name: str, limit: int) -> None:
        super().__init__(name, limit)
        self._registry = registry
        self._tokens: list[Token] = []

    async def acquire(self) -> None:
        from ray.exceptions import RayActorError

        registry = self._registry
        token = registry.token()
        try:
            await registry.call("acquire", self.name, self.limit, token)
        except (RayActorError, HostForgotten) as exc:
            # Not the agent's error to record: its host cancels this job, and every other
            # (the hub died, or forgot this host: Ray said it died, its trials go on
            # elsewhere).
            registry.lost(exc)
            await anyio.sleep_forever()
        except BaseException:
            registry.send("abandon", token, registry.loop())
            raise
        self._tokens.append(token)
        self._in_use += 1

    def release(self) -> None:
        if not self._tokens:
            raise RuntimeError(f"concurrency scope {self.name!r} released more often than acquired")
        registry = self._registry
        loop = registry.loop()  # before anything changes: it raises off the host's loop
        self._in_use -= 1
        registry.send("release", self._tokens.pop(), loop)
