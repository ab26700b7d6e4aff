"""The executor contract: every `Executor` runs what admission hands it, and nothing else.

One suite, run against each executor (`LocalExecutor` in this process, `RayExecutor`
on a real local Ray: those parameters are marked ``ray`` and ``slow``). The agents and
environments report to a board (`tests.support.ray_support`: in this process for the local
executor, a Ray actor otherwise) that gauges every limit at every instant and holds
tool calls at a gate: no sleeps. A new executor is one more parameter here.

These are the Ray executor's end-to-end cases too (on PostgreSQL and SQLite, asyncio and
trio): each runs once on the shared local Ray, not again in ``tests/system/``, which
keeps the Ray cases no other executor has (scopes across hosts, a dead scope hub, the CLI).
"""

from __future__ import annotations

import os
import random
import signal
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

pytestmark = pytest.mark.anyio
ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])


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


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store a test names by parameter: a SQLite file, or a PostgreSQL database."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_dsn"))
    return str(tmp_path / "store.db")


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


class Seen:
    """An observer: every commit it was told of, once each."""

    def __init__(self) -> None:
        self.commits: list[tuple[str, int, int, str]] = []

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        self.commits.append((key.task_id, key.trial, commit.seq, commit.kind))


@pytest.mark.parametrize(
    ("anyio_backend", "store", "seed"),
    [("asyncio", "postgres", 1), ("trio", "sqlite", 2)],
    ids=["postgres-asyncio", "sqlite-trio"],
    indirect=["store"],
)
async def test_every_limit_holds_at_every_instant_and_work_is_conserved(
    executor_kind: Place, store: str, seed: int, tmp_path: Path
) -> None:
    """Limits drawn from a seed; the gauge says none was ever exceeded (executions,
    evaluations apart, the total, per task, model and environment), and as many trials
    as the limits allow ran together (work conservation). The report, and the commits
    observers heard of (each once, from whichever host made it), are the in-process run's."""
    limits = limits_of(random.Random(seed))
    most = min(
        limits["max_parallel"],
        limits["max_parallel_by_model"]["m0"] + limits["max_parallel_by_environment"]["env1"],
    )
    board = executor_kind.board(gauge_limits(limits), gate_open=False)
    heard, heard_in_process = Seen(), Seen()
    report: corral.BenchmarkReport | None = None

    async def run() -> None:
        nonlocal report
        report = await runner(board, store, tasks(12)).run(
            "limits",
            trials_per_task=3,
            k_values=(1, 3),
            executor=executor_kind.executor(),
            observers=[heard],
            **limits,
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        # Work-conserving (across hosts): as many trials as the limits allow reach their
        # tool step together (held at the gate until they have).
        with anyio.fail_after(60):
            await call(board.wait_steps.remote(most))
        await call(board.open.remote())
    assert report is not None and report.counts["completed"] == 36
    seen = await call(board.report.remote())
    assert seen["violations"] == []
    assert seen["peaks"]["exec"] == most
    assert 1 <= seen["peaks"]["eval"] <= limits["max_parallel_evaluations"]
    reference = await runner(LocalBoard(), tmp_path / "reference.db", tasks(12)).run(
        "limits", trials_per_task=3, k_values=(1, 3), observers=[heard_in_process], **limits
    )
    assert comparable(report) == comparable(reference)
    assert len(set(heard.commits)) == len(heard.commits)
    assert sorted(heard.commits) == sorted(heard_in_process.commits)


@ASYNCIO
@pytest.mark.parametrize("store", ["postgres"], indirect=True)
async def test_dependencies_and_reflective_trials(
    executor_kind: Place, store: str, tmp_path: Path
) -> None:
    board = executor_kind.board()
    run = {"trials_per_task": 3, "max_parallel": 4, "max_parallel_per_task": 1}
    report = await runner(board, store, family(), gauged=False).run(
        "family", **run, executor=executor_kind.executor()
    )
    expected = await runner(LocalBoard(), tmp_path / "reference.db", family(), gauged=False).run(
        "family", **run
    )
    assert comparable(report) == comparable(expected)
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


@ASYNCIO
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


@ASYNCIO
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


@ASYNCIO
@pytest.mark.parametrize(
    ("how", "store"), [("ray.kill", "postgres"), ("SIGKILL", "sqlite")], indirect=["store"]
)
async def test_a_host_lost_mid_trial_changes_nothing_in_the_report(
    executor_kind: Place, how: str, store: str, tmp_path: Path
) -> None:
    """Four tool calls wait at the gate, two on each host: the host of one is killed
    (by Ray, or its process by SIGKILL). Its steps run again elsewhere, once."""
    if executor_kind.name == "local":
        pytest.skip("in process, a lost worker is a lost process: tests/system/test_kill9.py")
    import ray

    run = {"trials_per_task": 2, "max_parallel": 4, "max_parallel_per_task": 1}
    board = executor_kind.board(gate_open=False)
    report: corral.BenchmarkReport | None = None

    async def go() -> None:
        nonlocal report
        report = await runner(board, store, tasks(6), gauged=False).run(
            "bench", **run, executor=executor_kind.executor()
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(go)
        where = await call(board.wait_steps.remote(4))
        pid, actor = next(iter(where.values()))
        if how == "ray.kill":
            ray.kill(actor)
        else:
            os.kill(pid, signal.SIGKILL)
        await call(board.open.remote())
    assert report is not None
    reference = await runner(LocalBoard(), tmp_path / "reference.db", tasks(6), gauged=False).run(
        "bench", **run
    )
    assert comparable(report) == comparable(reference)
    steps = (await call(board.report.remote()))["steps"]
    assert len(steps) == 12 and max(steps.values()) == 2  # the lost host's steps ran again
    if how == "ray.kill":  # the lost host was fenced off before its trials went on
        import psycopg

        with psycopg.connect(store) as conn:
            fenced = conn.execute(
                "SELECT host FROM corral.claim_writers WHERE benchmark_id = 'bench' AND fenced"
            ).fetchall()
        assert len(fenced) == 1


class ScopeLimitsAgent:
    """t0 holds scope "api" (limit 1) at the board's gate; t1, once t0 holds it, names
    "api" with limit 2 (a `ConfigError`, caught), then opens the gate; t2 holds "api"
    (limit 1) after both."""

    def __init__(self, board: Any) -> None:
        self.board = board

    async def act(self, session: corral.AgentSession) -> corral.Final:
        if session.task_id == "t0":
            async with corral.concurrency("api", 1):
                await call(self.board.step.remote("t0 holds", os.getpid(), None))
                await call(self.board.left.remote())
            return corral.Final("held")
        if session.task_id == "t1":
            await call(self.board.wait_steps.remote(1))
            try:
                async with corral.concurrency("api", 2):
                    outcome = "not refused"
            except corral.ConfigError:
                outcome = "refused"
            await call(self.board.open.remote())
            return corral.Final(outcome)
        async with corral.concurrency("api", 1):
            return corral.Final("held")


@ASYNCIO
async def test_a_scope_named_with_another_limit_leaves_its_holders_alone(
    executor_kind: Place, tmp_path: Path
) -> None:
    """A scope used with another limit is that use's `ConfigError`, as in process: a
    trial holding the scope meanwhile releases it as usual, and the next one gets it."""
    board = executor_kind.board(gate_open=False)
    run = runner(
        board, tmp_path / "store.db", tasks(3), agent=ScopeLimitsAgent(board), gauged=False
    )
    # On Ray, t0 and t1 on one host (whose registry both use).
    ray = executor_kind.name == "ray"
    executor = corral.RayExecutor(hosts=1) if ray else executor_kind.executor()
    with anyio.fail_after(60):
        report = await run.run(
            "scopes", trials_per_task=1, max_parallel=2, max_retries=0, executor=executor
        )
    outputs = {task_id: [t.output for t in task.trials] for task_id, task in report.tasks.items()}
    assert outputs == {"t0": ["held"], "t1": ["refused"], "t2": ["held"]}
    assert report.counts["completed"] == 3
