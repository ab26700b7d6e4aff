"""The one worker pool (in process and on every Ray host): tasks are reused, a job
submitted while a worker delivers goes to that worker, and closing ends them all."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from bench.evaluation_lag import most_behind, scoring_order

from corral.executor._pool import WorkerPool
from corral.runtime._acks import Acks
from corral.testing import wait_all_tasks_blocked

pytestmark = pytest.mark.anyio


async def test_a_job_submitted_while_a_worker_delivers_is_that_workers() -> None:
    delivered: list[int] = []
    pool: WorkerPool[int, int]

    async def run(job: int) -> int:
        await anyio.lowlevel.checkpoint()
        return job

    def deliver(results: Sequence[int]) -> None:
        (result,) = results
        delivered.append(result)
        if result < 99:
            pool.submit(result + 1)  # what the run loop does: the freed slot's next job
        else:
            pool.close()

    pool = WorkerPool(run, deliver, Acks(lambda key, commit: None))
    async with anyio.create_task_group() as tg:
        pool.start(tg)
        pool.submit(0)
    assert delivered == list(range(100))
    assert pool.workers == 1


async def test_idle_workers_are_reused_and_close_ends_them() -> None:
    gate = anyio.Event()
    delivered: list[int] = []

    async def run(job: int) -> int:
        await gate.wait()
        return job

    pool: WorkerPool[int, int] = WorkerPool(run, delivered.extend, Acks(lambda k, c: None))
    async with anyio.create_task_group() as tg:
        pool.start(tg)
        for job in range(4):
            pool.submit(job)
        gate.set()
        await wait_all_tasks_blocked()  # all four idle now
        gate = anyio.Event()
        gate.set()
        for job in range(4, 8):
            pool.submit(job)
        await wait_all_tasks_blocked()
        pool.close()
    assert sorted(delivered) == list(range(8))
    assert pool.workers == 4


async def test_the_worker_that_ends_a_trial_starts_the_next_trial_before_scoring_it() -> None:
    """A trial's end admits its evaluation and the next trial together: the next trial
    (whose execution slot is taken from its admission) is the job the delivering
    worker goes on with at once; the evaluation waits for a worker to wake."""
    seen = await scoring_order(3, 1)
    assert sorted(seen) == sorted(
        (kind, f"t{i:05d}") for kind in ("act", "score") for i in range(3)
    )
    assert seen.index(("act", "t00001")) < seen.index(("score", "t00000"))
    assert seen.index(("act", "t00002")) < seen.index(("score", "t00001"))


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("rule", ["run_cost_limit", "fail_on_error"])
async def test_an_evaluation_that_may_stop_the_run_starts_before_the_next_trial(
    rule: str,
) -> None:
    """With a stop rule an evaluation can trip, a trial's evaluation goes first: behind
    agents that never wait it would start only when its worker yields (every 16 jobs),
    and 16 times as many trials would run past the rule. (asyncio only: trio's own
    scheduling spreads the count between runs, before this change as after.)"""
    from corral import BenchmarkTaskMetadata, Evaluation, Final, MemoryStore, Usage
    from tests.support.scripted import scripted_runner

    acted: list[str] = []

    def decide(session: Any) -> Final:
        acted.append(session.task_id)
        return Final("out")

    def evaluate(record: Any) -> Evaluation:
        if rule == "fail_on_error":
            raise ValueError("the scorer fails")
        return Evaluation(1.0, True, usage=Usage(cost=10.0))  # a model-graded scorer

    tasks = {f"t{i:03d}": BenchmarkTaskMetadata("a", "e") for i in range(200)}
    runner = scripted_runner(tasks, decide, evaluate, MemoryStore())
    stop: dict[str, Any] = (
        {"run_cost_limit": 5.0} if rule == "run_cost_limit" else {"fail_on_error": 0}
    )
    report = await runner.run("stops", max_parallel=8, **stop)
    assert report.stopped is not None and report.stopped.startswith(rule)
    # The 8 admitted at the start, and the one the first trial's end admitted with
    # its evaluation (before the fix: 128).
    assert len(acted) <= 2 * 8


async def test_trials_whose_agents_never_wait_leave_their_evaluations_room_to_run() -> None:
    """The worker that ends a trial starts the next at once; with agents that never
    wait it would go on so for every trial, and the evaluations it handed out (and
    their workers' results) would wait for its yield every 16 jobs. A worker yields
    whenever a job it handed out waits for its worker, or another worker yielded: a
    trial is scored within a few rounds of P trials of its start (before: 27 x P)."""
    seen = await scoring_order(200, 4)
    assert sum(kind == "act" for kind, _ in seen) == 200
    assert most_behind(seen) <= 4 * 4


async def test_a_job_that_let_the_loop_turn_ends_without_yielding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker yields at a job's end (a whole turn of the loop) only every 16 jobs, or
    when its job never let the loop turn: not merely because another worker yielded
    (before, in a busy run, one worker's yield every 16 jobs made every worker that
    ended a job in the same turn yield too, and theirs the next turn's: nearly every
    end of a trial whose agent waits paid a turn: 1,991-1,997 yields here).
    Each job waits two turns of the loop, as a model call outlasts a whole turn: trio
    runs half its batches of ready tasks in reverse order, and a job that waited one
    turn could run before a worker readied with it.
    """
    checkpoint = anyio.lowlevel.checkpoint

    async def run(job: int) -> int:
        await checkpoint()  # a model call, say: the loop turns (not counted)
        await checkpoint()
        return job

    assert await _yields_of_eight_chains(run, monkeypatch) <= 2000 // 16 + 8


async def test_a_job_no_job_follows_ends_without_yielding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker whose result admits no job of its own then waits for its next job, which
    lets the loop turn: it does not yield first. Here trials wait for their model call
    and end together, each handing out its evaluation, which never waits: before, an
    evaluation ending before a worker readied with it had run yielded, a turn of the
    loop a trial (1,000 yields here); now none does. A worker that goes on with a job
    still yields when it must
    (`test_trials_whose_agents_never_wait_leave_their_evaluations_room_to_run`)."""
    checkpoint = anyio.lowlevel.checkpoint

    async def run(job: int) -> int:
        if job < 1000:  # a trial: its model call outlasts a turn of the loop
            await checkpoint()
            await checkpoint()
        return job  # an evaluation: never waits

    assert await _yields_of_eight_chains(run, monkeypatch) == 0


async def _yields_of_eight_chains(
    run: Callable[[int], Awaitable[int]], monkeypatch: pytest.MonkeyPatch
) -> int:
    """The yields a pool's workers make running 8 chains of 125 trials (jobs below 1000)
    with ``run``, each trial handing out its chain's next one and its evaluation (1000 +
    its number), every one of the 2,000 jobs run."""
    pool: WorkerPool[int, int]
    ended = 0

    def deliver(results: Sequence[int]) -> None:
        nonlocal ended
        (job,) = results
        ended += 1
        if job < 1000:  # a trial: its chain's next one, and its evaluation
            pool.submit_all([job + 8] if job + 8 < 1000 else [])
            pool.submit_all([1000 + job])
        if ended == 2000:
            pool.close()

    pool = WorkerPool(run, deliver, Acks(lambda key, commit: None))
    async with anyio.create_task_group() as tg:
        pool.start(tg)
        yields = count_yields(pool, monkeypatch)
        pool.submit_all(range(8))  # 8 chains of trials at once
    assert ended == 2000
    return yields[0]


def count_yields(pool: WorkerPool[Any, Any], monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts (in the one item of the list returned) the yields ``pool``'s workers make
    at their jobs' ends from now on: set up after `WorkerPool.start`, which finds its
    backend's checkpoint (``anyio.lowlevel.checkpoint`` patched is never called)."""
    count = [0]
    checkpoint = pool._checkpoint

    async def counted() -> None:
        count[0] += 1
        await checkpoint()

    monkeypatch.setattr(pool, "_checkpoint", counted)
    return count


async def test_a_run_cancelled_in_a_delivery_lists_the_jobs_it_admitted_as_dropped() -> None:
    """The run is cancelled as a worker delivers its 16th job's result (after which it
    yields), which gives it a job and one to hand out after the yield: neither runs
    (nothing starts once a run is cancelled), and both are listed as dropped, so the
    run lands what a rate-limited trial's job among them carried; before, they were
    lost with the worker."""
    started: list[int] = []
    pool: WorkerPool[int, int]

    async def run(job: int) -> int:
        started.append(job)
        return job

    def deliver(results: Sequence[int]) -> None:
        (job,) = results
        if job == 15:  # the 16th end: its worker yields before going on
            pool.submit_all([100, 101])
            tg.cancel_scope.cancel()
        else:
            pool.submit(job + 1)

    pool = WorkerPool(run, deliver, Acks(lambda key, commit: None))
    async with anyio.create_task_group() as tg:
        pool.start(tg)
        pool.submit(0)
    assert started == list(range(16))
    assert sorted(pool.dropped()) == [100, 101]


@pytest.mark.parametrize("shielded", [False, True])
async def test_a_worker_goes_on_with_no_job_once_a_scope_around_the_run_is_cancelled(
    shielded: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scope around the pool's task group (the caller's) is cancelled as a worker
    delivers a result it goes on from without yielding (its job let the loop turn): the
    job the result admitted never starts, and is listed as dropped. Behind a shielded
    scope the cancellation never reaches the pool: every job runs. (The worker tests
    the scopes itself on asyncio before asking anyio: `_cancel_test`.)"""
    started: list[int] = []
    pool: WorkerPool[int, int]

    async def run(job: int) -> int:
        started.append(job)
        await anyio.lowlevel.checkpoint()  # a model call: its end costs no yield
        return job

    def deliver(results: Sequence[int]) -> None:
        (job,) = results
        if job == 3:
            around.cancel()
        if job < 9:
            pool.submit(job + 1)
        else:
            pool.close()

    pool = WorkerPool(run, deliver, Acks(lambda key, commit: None))
    with anyio.CancelScope() as around, anyio.CancelScope(shield=shielded):
        async with anyio.create_task_group() as tg:
            pool.start(tg)
            yields = count_yields(pool, monkeypatch)
            pool.submit(0)
    assert yields == [0]
    assert started == (list(range(10)) if shielded else [0, 1, 2, 3])
    assert list(pool.dropped()) == ([] if shielded else [4])
