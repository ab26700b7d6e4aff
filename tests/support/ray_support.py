"""Helpers for the Ray executor's tests: a board actor every host reports to, and a
benchmark whose agents and tools tell it what they do.

The board is a Ray actor, so trials on any host (and the coordinator) see one
`ConcurrencyGauge`, one ledger of tool step keys and one gate. Code in these
agents waits on the board, never on time.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import random
import signal
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

import anyio

import corral
from corral import Action, BenchmarkTaskMetadata, Evaluation, Final, ToolEffect
from corral.testing import ConcurrencyGauge


class Board:
    """One gauge, ledger and gate for a whole run (made a Ray actor by the tests)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self, limits: dict[Hashable, int] | None = None, gate_open: bool = True) -> None:
        """Start afresh (one board serves a module's tests: an actor takes a process)."""
        self.gauge = ConcurrencyGauge(limits)
        self.steps: Counter[str] = Counter()
        self.where: dict[str, tuple[int, Any]] = {}  # step key -> (pid, actor) of its host
        self.active = 0  # tool calls entered and not yet left
        self.seen: Counter[str] = Counter()  # any named event, counted
        self._gate = anyio.Event()
        self._gate_open = gate_open
        self._changed = anyio.Event()

    def _touch(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def enter(self, keys: list[Hashable]) -> None:
        self.gauge.enter(*keys)

    def exit(self, keys: list[Hashable]) -> None:
        self.gauge.exit(*keys)

    def count(self, name: str) -> int:
        """Count an event; return how many times it happened before."""
        self.seen[name] += 1
        return self.seen[name] - 1

    async def step(self, key: str, pid: int, actor: Any) -> None:
        self.steps[key] += 1
        self.where[key] = (pid, actor)
        self.active += 1
        self._touch()
        if not self._gate_open:
            await self._gate.wait()

    def left(self) -> None:
        self.active -= 1
        self._touch()

    def open(self) -> None:
        self._gate_open = True
        self._gate.set()

    async def wait_steps(self, n: int) -> dict[str, tuple[int, Any]]:
        """Once ``n`` tool calls are running: where each runs."""
        while self.active < n:
            await self._changed.wait()
        return dict(self.where)

    def report(self) -> dict[str, Any]:
        return {
            "violations": list(self.gauge.violations),
            "peaks": self.gauge.peaks,
            "steps": dict(self.steps),
            "active": self.active,
            "seen": dict(self.seen),
        }


async def call(ref: Any) -> Any:
    """Await a Ray call from any event loop (trio has no awaitable ObjectRef), or a
    `LocalBoard`'s."""
    if isinstance(ref, _LocalCall):
        return await ref.result()
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # not asyncio: trio
        pass
    else:
        return await ref
    import ray

    return await anyio.to_thread.run_sync(ray.get, ref, abandon_on_cancel=True)


class LocalBoard:
    """A `Board` in this process, called as a Ray actor is (``board.step.remote(...)``,
    awaited with `call`): the same agents serve tests of any executor."""

    def __init__(self, limits: dict[Any, int] | None = None, gate_open: bool = True) -> None:
        self._board = Board()
        self._board.reset(limits, gate_open)

    def __getattr__(self, name: str) -> _LocalMethod:
        return _LocalMethod(getattr(self._board, name))


class _LocalMethod:
    def __init__(self, method: Any) -> None:
        self.method = method

    def remote(self, *args: Any) -> _LocalCall:
        return _LocalCall(self.method, args)


class _LocalCall:
    def __init__(self, method: Any, args: tuple[Any, ...]) -> None:
        self.method, self.args = method, args

    async def result(self) -> Any:
        value = self.method(*self.args)
        return await value if inspect.isawaitable(value) else value


class Boards:
    """A module's boards: two actors, each made afresh by `get` (reset, not restarted)."""

    def __init__(self) -> None:
        import ray

        self.actors = [
            ray.remote(Board).options(num_cpus=0, max_concurrency=1000).remote() for _ in range(2)
        ]

    def get(self, n: int = 0, limits: dict[Any, int] | None = None, gate_open: bool = True) -> Any:
        import ray

        actor = self.actors[n]
        ray.get(actor.reset.remote(limits, gate_open))
        return actor

    def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)


def scope_hubs() -> list[Any]:
    """The scope hubs alive on this Ray (actors of Corral's namespace), as handles."""
    import ray

    from corral.executor._scopes import NAMESPACE, hub

    return [
        hub(actor["name"], create=False)
        for actor in ray.util.list_named_actors(all_namespaces=True)
        if actor["namespace"] == NAMESPACE and actor["name"].startswith("corral-scopes-")
    ]


def _here() -> tuple[int, Any]:
    import ray

    if not ray.is_initialized():  # in process, without Ray (asking would start one)
        return os.getpid(), None
    try:
        actor = ray.get_runtime_context().current_actor
    except Exception:  # in the coordinator (the in-process reference run)
        actor = None
    return os.getpid(), actor


class BoardAgent:
    """One tool step, then ``Final``. With ``scope``, it holds that `concurrency` scope
    while it acts; with ``cost``, its action records that cost."""

    def __init__(self, board: Any, scope: int | None = None, cost: float = 0.0):
        self.board = board
        self.scope = scope
        self.cost = cost

    async def act(self, session: corral.AgentSession) -> Action | Final:
        if self.scope is not None:
            async with corral.concurrency("api", self.scope):
                await call(self.board.enter.remote([("scope", "api")]))
                await call(self.board.exit.remote([("scope", "api")]))
        if session.iteration:
            keys = session.scratch.get("keys")
            if keys is not None:
                await call(self.board.exit.remote(keys))
            previous = session.previous_evaluation
            return Final(
                {
                    "state": session.state,
                    "inputs": dict(session.inputs),
                    "previous": None if previous is None else previous.score,
                    "previous_state": session.previous_state,
                }
            )
        if self.cost:
            session.record_usage(cost=self.cost)
        return Action("step", {"n": session.trial + 1})


class LimitedOnceAgent:
    """Records a cost of 1.0 and is rate limited (its scratch says so, for when it
    goes on), then takes one tool step (the action commit carries that cost), then
    ``Final``."""

    async def act(self, session: corral.AgentSession) -> Action | Final:
        if session.iteration:
            return Final(session.state)
        if not session.scratch.get("limited"):
            session.scratch["limited"] = True
            session.record_usage(cost=1.0)
            raise corral.RateLimited("slow down", retry_after=0.0)
        return Action("step", {"n": 1})


async def kill_at_the_gate(
    run: Callable[[], Awaitable[None]], board: Any, steps: int, *, every: bool = True
) -> None:
    """Run ``run`` until ``steps`` steps wait at ``board``'s closed gate, SIGKILL the
    hosts they run on (``every``; else the first step's only), then open the gate and
    let the run finish."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        where = await call(board.wait_steps.remote(steps))
        pids = [pid for pid, _ in where.values()]
        for pid in set(pids) if every else pids[:1]:
            os.kill(pid, signal.SIGKILL)
        await call(board.open.remote())


async def through_gate(board: Any, session: corral.AgentSession) -> None:
    """Step through ``board``'s gate as the action ``session`` executes (from its host)."""
    assert session.step_key is not None
    pid, actor = _here()
    try:
        await call(board.step.remote(session.step_key, pid, actor))
    finally:
        with anyio.CancelScope(shield=True):
            await call(board.left.remote())


class BoardEnvironment:
    """Enters the gauge at setup (left when the agent answers), steps through the board's
    gate, and scores with the evaluation keys held. With ``rate_limited``, the first
    setup of each trial raises `RateLimited` (before it enters the gauge)."""

    def __init__(self, board: Any, gauged: bool = True, rate_limited: bool = False) -> None:
        self.board = board
        self.gauged = gauged
        self.rate_limited = rate_limited

    async def setup(self, session: corral.AgentSession) -> int:
        if self.rate_limited:
            name = f"limited {session.task_id}/{session.trial}"
            if await call(self.board.count.remote(name)) == 0:
                raise corral.RateLimited("slow down", retry_after=0.001)
        if self.gauged:
            meta = session.metadata
            keys = [
                "exec",
                "total",
                ("task", session.task_id),
                ("model", meta.model),
                ("env", meta.environment_id),
            ]
            await call(self.board.enter.remote(keys))
            session.scratch["keys"] = keys
        return 0

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        await through_gate(self.board, session)
        return ToolEffect("ok", session.state + action.arguments["n"])

    async def evaluate(self, trial: corral.TrialRecord) -> Evaluation:
        keys = ["eval", "total"]
        if self.gauged:
            await call(self.board.enter.remote(keys))
            await call(self.board.exit.remote(keys))
        output = trial.output or {}
        score = float(output.get("state", 0)) if isinstance(output, dict) else 0.0
        return Evaluation(score, score % 2 == 1)


def tasks(n: int, *, models: int = 2, environments: int = 2) -> dict[str, BenchmarkTaskMetadata]:
    return {
        f"t{i}": BenchmarkTaskMetadata(
            "agent", f"env{i % environments}", model=f"m{i % models}", max_iterations=3
        )
        for i in range(n)
    }


def comparable(report: corral.BenchmarkReport) -> dict[str, Any]:
    """What must be equal between two runs of one benchmark, wherever they ran."""
    return {
        "pass_at_k": report.pass_at_k,
        "counts": report.counts,
        "trials": {
            (task_id, t.trial): (str(t.status), t.output, t.evaluation, t.commits, t.error)
            for task_id, task in report.tasks.items()
            for t in task.trials
        },
    }


class OnlyHere:
    """An environment that pickles, but cannot be loaded in any other process."""

    def __init__(self) -> None:
        self.pid = os.getpid()

    def __reduce__(self) -> tuple[Any, ...]:
        return _only_here, (self.pid,)

    async def setup(self, session: corral.AgentSession) -> None:
        return None

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        return ToolEffect(None)

    async def evaluate(self, trial: corral.TrialRecord) -> Evaluation:
        return Evaluation(0.0, False)


def _only_here(pid: int) -> OnlyHere:
    if os.getpid() != pid:
        raise RuntimeError("this environment cannot be loaded on a host")
    return OnlyHere()


class CostlyAgent:
    """Spends 1.0 of cost and answers at once."""

    async def act(self, session: corral.AgentSession) -> Final:
        session.record_usage(cost=1.0)
        return Final(1)


class LockInScratch:
    """Keeps a lock in task t0's scratch (as an agent keeping a live client there would),
    then hits a rate limit once: the trial is deferred, scratch and all."""

    async def act(self, session: corral.AgentSession) -> Final:
        if session.task_id == "t0" and "lock" not in session.scratch:
            session.scratch["lock"] = threading.Lock()
            raise corral.RateLimited(retry_after=0.0)
        return Final(1)


class PlainEnvironment:
    async def setup(self, session: corral.AgentSession) -> int:
        return 0

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        return ToolEffect(None)

    async def evaluate(self, trial: corral.TrialRecord) -> Evaluation:
        return Evaluation(1.0, True)


class HostScorer(PlainEnvironment):
    """Passes a trial only when scored in a process other than the one that made it
    (a scorer that needs what only the hosts have: a sandbox, a GPU)."""

    def __init__(self) -> None:
        self.pid = os.getpid()

    async def evaluate(self, trial: corral.TrialRecord) -> Evaluation:
        on_a_host = os.getpid() != self.pid
        return Evaluation(float(on_a_host), on_a_host)


def limits_of(rng: random.Random) -> dict[str, Any]:
    return {
        "max_parallel": rng.randint(2, 6),
        "max_parallel_per_task": rng.randint(1, 2),
        "max_parallel_evaluations": rng.randint(1, 3),
        "max_parallel_by_model": {"m0": rng.randint(1, 3)},
        "max_parallel_by_environment": {"env1": rng.randint(1, 2)},
    }


def gauge_limits(limits: dict[str, Any]) -> dict[Any, int]:
    out: dict[Any, int] = {
        "exec": limits["max_parallel"],
        "eval": limits["max_parallel_evaluations"],
        "total": limits["max_parallel"] + limits["max_parallel_evaluations"],
        ("model", "m0"): limits["max_parallel_by_model"]["m0"],
        ("env", "env1"): limits["max_parallel_by_environment"]["env1"],
    }
    for i in range(12):
        out[("task", f"t{i}")] = limits["max_parallel_per_task"]
    return out


def family() -> dict[str, BenchmarkTaskMetadata]:
    meta = BenchmarkTaskMetadata("agent", "env0", model="m0", max_iterations=3)
    return {
        "a": meta,
        "b": BenchmarkTaskMetadata("agent", "env1", dependencies=("a",)),
        "c": BenchmarkTaskMetadata("agent", "env0", dependencies=("a",)),
        "d": BenchmarkTaskMetadata("agent", "env1", max_iterations=1),  # never answers
        "e": BenchmarkTaskMetadata("agent", "env0", dependencies=("d",)),
    }


def _subprocess_bound() -> int:
    """The bound the `corral.subprocess` call just made ran under, where it ran."""
    return corral.ConcurrencyScopes.current().subprocess_scope().limit


class SubprocessBoundAgent:
    """Runs a command with `corral.subprocess` and answers the bound it ran under."""

    async def act(self, session: corral.AgentSession) -> Final:
        await corral.subprocess(["true"], timeout=30, check=True)
        return Final(_subprocess_bound())


class SubprocessBoundScorer(PlainEnvironment):
    """Scores with `corral.subprocess` (as `code_tests` does): the score is its bound."""

    async def evaluate(self, trial: corral.TrialRecord) -> Evaluation:
        await corral.subprocess(["true"], timeout=30, check=True)
        return Evaluation(float(_subprocess_bound()), True)


class ScopeAtTheGate:
    """Holds the `concurrency` scope ``api`` (1) through the board's gate (the board's
    gauge counting its holders), then ``Final``."""

    def __init__(self, board: Any) -> None:
        self.board = board

    async def act(self, session: corral.AgentSession) -> Final:
        async with corral.concurrency("api", 1):
            await call(self.board.enter.remote([("scope", "api")]))
            try:
                pid, actor = _here()
                await call(self.board.step.remote(f"{session.task_id}/{session.trial}", pid, actor))
                await call(self.board.left.remote())
            finally:
                await call(self.board.exit.remote([("scope", "api")]))
        return Final(1)
