"""Live tasks stay within max_parallel_total + 16 at every instant, also when the store lags
(the bound README.md states): a lagging store holds admission back, never parks finished
work in tasks."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel
import pytest

import corral
from corral import BenchmarkReport, BenchmarkTaskMetadata, Commit, Final, TrialKey
from corral.store import Pending
from corral.testing import FakeEnvironment, LaggingStore, ScriptedAgent, wait_all_tasks_blocked

from ..support.live_tasks import LiveTasks

pytestmark = pytest.mark.anyio


class Sampler:
    """The most live tasks (beyond ``baseline``) seen at any sample."""

    def __init__(self) -> None:
        self.baseline = len(anyio.get_running_tasks())
        self.peak = 0

    def sample(self) -> None:
        self.peak = max(self.peak, len(anyio.get_running_tasks()) - self.baseline)


class SampledStore(LaggingStore):
    """Samples the live tasks at every append: each trial's and evaluation's commits."""

    def __init__(self, sampler: Sampler) -> None:
        super().__init__()
        self.sampler = sampler

    def enqueue(self, key: TrialKey, commits: Sequence[Commit]) -> Pending:
        self.sampler.sample()
        return super().enqueue(key, commits)


async def lagging_run(sampler: Sampler, *, trials: int, parallel: int) -> BenchmarkReport:
    """Instant trials on a store that acknowledges appends only when everything else is
    blocked (every worker waits for it), then all at once."""

    def decide(session: corral.AgentSession) -> Final:
        sampler.sample()
        return Final(1)

    store = SampledStore(sampler)
    tasks = {f"t{i:04}": BenchmarkTaskMetadata("a", "e") for i in range(trials)}
    runner = corral.CorralRunner(
        tasks,
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=store,
        max_backlog=32,
    )
    report: BenchmarkReport | None = None

    async def go() -> None:
        nonlocal report
        report = await runner.run("b", max_parallel=parallel)

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        while report is None:
            await wait_all_tasks_blocked()
            store.release()
            await anyio.lowlevel.checkpoint()
    assert store.peak > 32  # the store did lag: the backlog filled up
    return report


@pytest.mark.parametrize("parallel", [8, 64])
async def test_live_tasks_stay_bounded_while_the_store_lags(parallel: int) -> None:
    sampler = Sampler()
    report = await lagging_run(sampler, trials=300, parallel=parallel)
    assert report.counts["completed"] == 300
    # max_parallel_total is 2 * max_parallel (executions plus evaluations).
    assert sampler.peak <= 2 * parallel + 16


class GatedStore(LaggingStore):
    """Holds every append until the test opens its gate (`release`), and counts the
    commits handed over."""

    def __init__(self) -> None:
        super().__init__()
        self.commits = 0

    def enqueue(self, key: TrialKey, commits: Sequence[Commit]) -> Pending:
        self.commits += len(commits)
        return super().enqueue(key, commits)


@pytest.mark.parametrize("max_backlog", [16, 1024])
async def test_live_tasks_counted_at_every_task_start_stay_within_the_bound(
    max_backlog: int,
) -> None:
    """P = 64, two-step trials, on a store whose writes are held until every task of the
    run waits (the most a store can lag): live tasks are counted exactly at every task's
    start and end, not sampled, and never exceed ``max_parallel_total + 16``."""
    parallel, trials = 64, 1500
    store = GatedStore()
    tasks = {f"t{i:04}": BenchmarkTaskMetadata("a", "e") for i in range(trials)}
    runner = corral.CorralRunner(
        tasks,
        {"a": ScriptedAgent(lambda s: corral.Action("step") if not s.iteration else Final(1))},
        {"e": FakeEnvironment()},
        store=store,
        max_backlog=max_backlog,
    )
    report: BenchmarkReport | None = None
    counter = LiveTasks()

    async def go() -> None:
        nonlocal report
        report = await runner.run("b", max_parallel=parallel)

    with counter.counting():
        baseline = counter.live
        async with anyio.create_task_group() as tg:
            tg.start_soon(go)
            releases = 0
            while report is None:
                await wait_all_tasks_blocked()
                store.release()
                releases += 1
                await anyio.lowlevel.checkpoint()
    assert report.counts["completed"] == trials
    # The store lagged: past the backlog's bound when it is small, else every running
    # trial waited for its action to be durable.
    assert store.peak > min(max_backlog, parallel)
    assert releases > trials // (2 * parallel)  # it held the run back many times
    # The run's tasks: its own (``go``) and everything it started.
    assert counter.peak - baseline <= 2 * parallel + 16
