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
