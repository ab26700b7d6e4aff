"""The executor contract: every `Executor` runs what admission hands it, and nothing else.

One suite, run against each executor (`LocalExecutor` in this process, `RayExecutor`
on a real local Ray: those parameters are marked ``ray`` and ``slow``). The agents and
environments report to a board (`tests.ray_support`: in this process for the local
executor, a Ray actor otherwise) that gauges every limit at every instant and holds
tool calls at a gate: no sleeps. A new executor is one more parameter here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

import corral
from corral import BenchmarkTaskMetadata

from ..support.ray_support import (
    BoardAgent,
    BoardEnvironment,
    LocalBoard,
    call,
    comparable,
    family,
    gauge_limits,
    limits_of,
    tasks,
)

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


@dataclass
class Place:
    """Where a test's trials run: a fresh executor, and a board the trials report to."""

    name: str
    executor: Callable[[], corral.Executor]
    board: Callable[..., Any]


@pytest.fixture(params=["local", "ray"])
def executor_kind(request: pytest.FixtureRequest) -> Place:
    if request.param == "local":
        return Place("local", corral.LocalExecutor, LocalBoard)
    request.getfixturevalue("ray_cluster")
    boards = request.getfixturevalue("boards")
    return Place(
        "ray",
        lambda: corral.RayExecutor(hosts=2),
        lambda limits=None, gate_open=True: boards.get(0, limits, gate_open),
    )


def runner(
    board: Any,
    store: Any,
    task_set: dict[str, BenchmarkTaskMetadata],
    *,
    agent: Any = None,
    gauged: bool = True,
    rate_limited: bool = False,
) -> corral.CorralRunner:
    env = BoardEnvironment(board, gauged=gauged, rate_limited=rate_limited)
    return corral.CorralRunner(
        task_set,
        {"agent": agent or BoardAgent(board)},
        {"env0": env, "env1": env},
        store=store,
        backoff_base=0.001,
        backoff_cap=0.001,
    )


@pytest.mark.parametrize("seed", [1, 2])
async def test_every_limit_holds_at_every_instant_and_work_is_conserved(
    executor_kind: Place, seed: int, tmp_path: Path
) -> None:
    """Limits drawn from a seed; the gauge says none was ever exceeded (executions,
    evaluations apart, the total, per task, model and environment), and as many trials
    as the limits allow ran together (work conservation)."""
    limits = limits_of(random.Random(seed))
    most = min(
        limits["max_parallel"],
        limits["max_parallel_by_model"]["m0"] + limits["max_parallel_by_environment"]["env1"],
    )
    board = executor_kind.board(gauge_limits(limits), gate_open=False)
    report: corral.BenchmarkReport | None = None

    async def run() -> None:
        nonlocal report
        report = await runner(board, tmp_path / "store.db", tasks(12)).run(
            "limits",
            trials_per_task=3,
            executor=executor_kind.executor(),
            **limits,
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        with anyio.fail_after(60):
            await call(board.wait_steps.remote(most))
        await call(board.open.remote())
    assert report is not None and report.counts["completed"] == 36
    seen = await call(board.report.remote())
    assert seen["violations"] == []
    assert seen["peaks"]["exec"] == most
    assert 1 <= seen["peaks"]["eval"] <= limits["max_parallel_evaluations"]


async def test_dependencies_and_reflective_trials(executor_kind: Place, tmp_path: Path) -> None:
    board = executor_kind.board()
    report = await runner(board, tmp_path / "store.db", family(), gauged=False).run(
        "family",
        trials_per_task=3,
        max_parallel=4,
        max_parallel_per_task=1,
        executor=executor_kind.executor(),
    )
    assert report.counts["unreachable"] == 3  # e's trials: d never answers
    # Each trial of b saw a's output, and (reflective) its own previous trial's score.
    outputs = [t.output for t in report.tasks["b"].trials]
    assert [o["previous"] for o in outputs] == [None, 1.0, 2.0]
    assert all("a" in o["inputs"] for o in outputs)


class FlakyAgent:
    """Each trial's first attempt fails; the retry answers."""

    def __init__(self, board: Any) -> None:
        self.board = board

    async def act(self, session: corral.AgentSession) -> corral.Final:
        if await call(self.board.count.remote(f"flaky {session.task_id}/{session.trial}")) == 0:
            raise RuntimeError("flaky")
        return corral.Final(session.attempt)


async def test_retries_and_rate_limit_deferrals(executor_kind: Place, tmp_path: Path) -> None:
    """Every trial's setup is rate limited once (deferred, then continued: not a failed
    attempt) and its first attempt fails (retried)."""
    board = executor_kind.board()
    flaky = runner(
        board,
        tmp_path / "store.db",
        tasks(6),
        agent=FlakyAgent(board),
        gauged=False,
        rate_limited=True,
    )
    report = await flaky.run(
        "flaky", trials_per_task=2, max_parallel=3, executor=executor_kind.executor()
    )
    assert report.counts["completed"] == 12
    trials = [t for task in report.tasks.values() for t in task.trials]
    assert {t.attempts for t in trials} == {2} and {t.output for t in trials} == {1}
    seen = (await call(board.report.remote()))["seen"]
    # Each trial set up twice: rate limited once, then it went on (its retry reuses the
    # recorded setup).
    limited = {n: c for n, c in seen.items() if n.startswith("limited")}
    assert limited == {f"limited t{i}/{r}": 2 for i in range(6) for r in range(2)}


async def test_a_cancelled_run_stops_everything_and_resumes_to_the_same_report(
    executor_kind: Place, tmp_path: Path
) -> None:
    store = tmp_path / "store.db"
    run = {"trials_per_task": 2, "max_parallel": 4, "max_parallel_per_task": 1}
    board = executor_kind.board(gate_open=False)
    with anyio.CancelScope() as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: runner(board, store, tasks(6), gauged=False).run(
                    "bench", **run, executor=executor_kind.executor()
                )
            )
            await call(board.wait_steps.remote(4))
            scope.cancel()
    seen = await call(board.report.remote())
    assert seen["active"] == 0  # every tool call had ended when run() returned
    assert len(seen["steps"]) == 4
    await call(board.open.remote())
    report = await runner(board, store, tasks(6), gauged=False).run(
        "bench", **run, executor=executor_kind.executor()
    )
    reference = await runner(LocalBoard(), tmp_path / "reference.db", tasks(6), gauged=False).run(
        "bench", **run
    )
    assert comparable(report) == comparable(reference)
    steps = (await call(board.report.remote()))["steps"]
    assert len(steps) == 12 and max(steps.values()) <= 2  # a cut step ran again, once


async def test_a_host_lost_mid_trial_changes_nothing_in_the_report(
    executor_kind: Place, tmp_path: Path
) -> None:
    if executor_kind.name == "local":
        pytest.skip("in process, a lost worker is a lost process: tests/test_kill9.py")
    import ray

    run = {"trials_per_task": 2, "max_parallel": 4, "max_parallel_per_task": 1}
    board = executor_kind.board(gate_open=False)
    report: corral.BenchmarkReport | None = None

    async def go() -> None:
        nonlocal report
        report = await runner(board, tmp_path / "store.db", tasks(6), gauged=False).run(
            "bench", **run, executor=executor_kind.executor()
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        where = await call(board.wait_steps.remote(4))
        _, actor = next(iter(where.values()))
        ray.kill(actor)
        await call(board.open.remote())
    assert report is not None
    reference = await runner(LocalBoard(), tmp_path / "reference.db", tasks(6), gauged=False).run(
        "bench", **run
    )
    assert comparable(report) == comparable(reference)
    steps = (await call(board.report.remote()))["steps"]
    assert len(steps) == 12 and max(steps.values()) == 2  # the lost host's steps ran again
