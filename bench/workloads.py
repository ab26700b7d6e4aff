"""The workloads every runner gets, and the probes every measurement uses.

Throughput: N tasks x 4 trials of an agent that awaits ``sleep(L)`` and then
takes one tool step, scored by a trivial scorer. Scheduling: a mixed-limit
workload (two models, one limited; two environments, one limited; one trial
of a task at a time) with random durations from a fixed seed, and its lower
bound on the makespan. Probes: peak live asyncio tasks (counted exactly by a
task factory in every event loop, so every runner is measured the same way),
time in the garbage collector (``gc.callbacks``), CPU time and peak RSS.
"""

from __future__ import annotations

import asyncio
import gc
import random
import resource
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

# The environment of bench/throughput.py (re-exported): its one tool adds ``n``
# to the state, and a trial passes when its output is 1.
from throughput import CountingEnvironment as CountingEnvironment

import corral
from corral import Action, BenchmarkTaskMetadata, Final

TRIALS_PER_TASK = 4

# -- throughput workload -------------------------------------------------------


class SleepThenStepAgent:
    """Awaits ``sleep(latency)`` (the model call), proposes one tool step, then answers."""

    def __init__(self, latency: float) -> None:
        self.latency = latency

    async def act(self, session: corral.AgentSession) -> Action | Final:
        if session.iteration:
            return Final(session.state)
        await anyio.sleep(self.latency)
        return Action("step", {"n": 1})


def throughput_tasks(n: int) -> dict[str, BenchmarkTaskMetadata]:
    """N identical tasks on one agent, one environment and one model."""
    meta = BenchmarkTaskMetadata("agent", "env", model="model")
    return {f"t{i}": meta for i in range(n)}


# -- scheduling workload -------------------------------------------------------


@dataclass(frozen=True)
class MixedWorkload:
    """Tasks with mixed limits and each trial's duration (virtual seconds)."""

    seed: int
    tasks: dict[str, BenchmarkTaskMetadata]
    durations: dict[tuple[str, int], float]
    trials_per_task: int
    max_parallel: int = 16
    max_parallel_per_task: int = 1
    by_model: dict[str, int] = field(default_factory=lambda: {"small-model": 2})
    by_environment: dict[str, int] = field(default_factory=lambda: {"slow-env": 1})


def mixed_workload(seed: int, tasks: int = 120, trials: int = TRIALS_PER_TASK) -> MixedWorkload:
    """About 10% of tasks use the model limited to 2 and 5% the environment limited to 1.

    Durations are uniform in [0.5, 10] virtual seconds, one per trial.
    """
    rng = random.Random(seed)
    metas: dict[str, BenchmarkTaskMetadata] = {}
    durations: dict[tuple[str, int], float] = {}
    for i in range(tasks):
        name = f"t{i:03d}"
        model = "small-model" if rng.random() < 0.10 else "big-model"
        env = "slow-env" if rng.random() < 0.05 else "fast-env"
        metas[name] = BenchmarkTaskMetadata("agent", env, model=model)
        for r in range(trials):
            durations[(name, r)] = round(rng.uniform(0.5, 10.0), 2)
    return MixedWorkload(seed, metas, durations, trials)


def lower_bound(w: MixedWorkload) -> float:
    """The largest of: all work over max_parallel; each limited model's and environment's
    work over its limit; and each task's trials in sequence (one at a time)."""
    total = sum(w.durations.values())
    bounds = [total / w.max_parallel]
    for model, limit in w.by_model.items():
        work = sum(d for (t, _), d in w.durations.items() if w.tasks[t].model == model)
        bounds.append(work / limit)
    for env, limit in w.by_environment.items():
        work = sum(d for (t, _), d in w.durations.items() if w.tasks[t].environment_id == env)
        bounds.append(work / limit)
    per_task: dict[str, float] = {}
    for (t, _), d in w.durations.items():
        per_task[t] = per_task.get(t, 0.0) + d
    bounds.append(max(per_task.values()) / min(w.max_parallel_per_task, w.trials_per_task))
    return max(bounds)


class DurationAgent:
    """Sleeps its trial's duration, takes one tool step, then answers."""

    def __init__(self, durations: dict[tuple[str, int], float]) -> None:
        self.durations = durations

    async def act(self, session: corral.AgentSession) -> Action | Final:
        if session.iteration:
            return Final(session.state)
        await anyio.sleep(self.durations[(session.task_id, session.trial)])
        return Action("step", {"n": 1})


# -- probes --------------------------------------------------------------------


class TaskCounter:
    """Counts live asyncio tasks exactly: created and not yet done, in every event loop.

    While entered, every new event loop gets a task factory that counts each
    task it creates and uncounts it when it is done; ``asyncio.run``,
    ``anyio.run`` and Inspect's own loop all create theirs through the policy,
    so every runner is measured the same way. (A thread sampling the task set
    instead misses peaks: a CPU-bound loop starves it of the GIL.)
    """

    def __init__(self) -> None:
        self.live = 0
        self.peak = 0
        self.created = 0
        self._policy = asyncio.get_event_loop_policy()

    def _factory(
        self, loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any
    ) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.Task(coro, loop=loop, **kwargs)
        self.created += 1
        self.live += 1
        if self.live > self.peak:
            self.peak = self.live
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.live -= 1

    def __enter__(self) -> TaskCounter:
        counter = self

        class CountingPolicy(asyncio.DefaultEventLoopPolicy):
            def new_event_loop(self) -> asyncio.AbstractEventLoop:
                loop = super().new_event_loop()
                loop.set_task_factory(counter._factory)
                return loop

        asyncio.set_event_loop_policy(CountingPolicy())
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.set_event_loop_policy(self._policy)


class GcTimer:
    """Wall time spent in the garbage collector, by generation, via ``gc.callbacks``."""

    def __init__(self) -> None:
        self.seconds = [0.0, 0.0, 0.0]
        self.collections = [0, 0, 0]
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            generation = info["generation"]
            self.seconds[generation] += time.perf_counter() - self._started
            self.collections[generation] += 1

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)


def rss_mb() -> float:
    """Current resident set size in MB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20


def peak_rss_mb() -> float:
    """Peak resident set size of this process so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass
class Probe:
    """What `measured` records about one run."""

    wall: float = 0.0
    cpu: float = 0.0
    rss_before_mb: float = 0.0
    peak_rss_mb: float = 0.0
    peak_tasks: int = 0
    tasks_created: int = 0
    gc_seconds: list[float] = field(default_factory=list)
    gc_collections: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "wall_s": self.wall,
            "cpu_s": self.cpu,
            "rss_before_mb": self.rss_before_mb,
            "peak_rss_mb": self.peak_rss_mb,
            "peak_live_tasks": self.peak_tasks,
            "tasks_created": self.tasks_created,
            "gc_s": sum(self.gc_seconds),
            "gc_s_by_generation": self.gc_seconds,
            "gc_collections": self.gc_collections,
        }


@contextmanager
def measured() -> Iterator[Probe]:
    """Measure the body: wall and CPU time, GC time, peak live tasks and peak RSS.

    The body must create its event loop inside (``asyncio.run``, ``anyio.run``)."""
    probe = Probe(rss_before_mb=rss_mb())
    with TaskCounter() as tasks, GcTimer() as gc_timer:
        cpu = time.process_time()
        start = time.perf_counter()
        yield probe
        probe.wall = time.perf_counter() - start
        probe.cpu = time.process_time() - cpu
    probe.peak_tasks = tasks.peak
    probe.tasks_created = tasks.created
    probe.gc_seconds = gc_timer.seconds
    probe.gc_collections = gc_timer.collections
    probe.peak_rss_mb = peak_rss_mb()
