"""The Ray executor end to end on a local Ray (2 CPUs, 2 hosts): every limit holds across
hosts, the report equals the in-process one, on PostgreSQL and on SQLite."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import corral

from ..support import pg
from ..support.ray_support import (
    BoardAgent,
    BoardEnvironment,
    Boards,
    CostlyAgent,
    OnlyHere,
    PlainEnvironment,
    call,
    comparable,
    gauge_limits,
    limits_of,
    tasks,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ray_cluster")]

ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "store.db")
    else:
        yield from pg.fresh_database()


def runner(
    b: Any, store: Any, n: int, *, rate_limited: bool = False, scope: int | None = None
) -> corral.CorralRunner:
    env = BoardEnvironment(b, rate_limited=rate_limited)
    return corral.CorralRunner(
        tasks(n),
        {"agent": BoardAgent(b, scope=scope)},
        {"env0": env, "env1": env},
        store=store,
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
async def test_limits_hold_across_hosts_and_the_report_is_the_in_process_one(
    store: str, seed: int, tmp_path: Path, boards: Boards
) -> None:
    """Property style: limits drawn from a seed; a gauge every host enters says none was
    ever exceeded, and the global one was reached (work conservation)."""
    limits = limits_of(random.Random(seed))
    # Tasks on m0 are the env0 tasks, the others run in env1: at most this many can run.
    most = min(
        limits["max_parallel"],
        limits["max_parallel_by_model"]["m0"] + limits["max_parallel_by_environment"]["env1"],
    )
    remote_board = boards.get(0, gauge_limits(limits), gate_open=False)
    heard, heard_in_process = Seen(), Seen()
    report: corral.BenchmarkReport | None = None

    async def run() -> None:
        nonlocal report
        report = await runner(remote_board, store, 12).run(
            "limits",
            trials_per_task=3,
            k_values=(1, 3),
            executor=corral.RayExecutor(hosts=2),
            observers=[heard],
            **limits,
        )

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        # Work-conserving across hosts: as many trials as the limits allow reach their
        # tool step together (held at the gate until they have).
        with anyio.fail_after(60):
            await call(remote_board.wait_steps.remote(most))
        await call(remote_board.open.remote())
    assert report is not None
    seen = await call(remote_board.report.remote())
    assert seen["violations"] == []
    assert seen["peaks"]["exec"] == most
    reference_board = boards.get(1)
    reference = await runner(reference_board, tmp_path / "reference.db", 12).run(
        "limits", trials_per_task=3, k_values=(1, 3), observers=[heard_in_process], **limits
    )
    assert comparable(report) == comparable(reference)
    # Observers heard of every commit once, from whichever host made it.
    assert len(set(heard.commits)) == len(heard.commits)
    assert sorted(heard.commits) == sorted(heard_in_process.commits)
    assert report.counts["completed"] == 36


@ASYNCIO
async def test_rate_limits_scopes_and_host_capacity_hold_across_two_hosts(
    tmp_path: Path, boards: Boards
) -> None:
    # trials_per_host=2: the hosts run 4 trials and evaluations at most, whatever the limits.
    remote_board = boards.get(0, {("scope", "api"): 2, "total": 4})
    store = str(tmp_path / "store.db")
    watcher = ScopeWatcher()
    report = await runner(remote_board, store, 8, rate_limited=True, scope=2).run(
        "limited",
        trials_per_task=2,
        max_parallel=6,
        max_parallel_per_task=2,
        executor=corral.RayExecutor(hosts=2, trials_per_host=2),
        observers=[watcher],
    )
    # The observers (the live display) see the scope the hosts share, as the hub has it.
    api = watcher.at_end["api"]
    assert (api.limit, api.in_use, api.waiting) == (2, 0, 0) and 1 <= api.peak <= 2
    seen = await call(remote_board.report.remote())
    assert seen["violations"] == []
    assert seen["peaks"]["total"] <= 4
    assert report.counts["completed"] == 16
    # Every trial was rate limited once and then went on (on whichever host).
    assert sorted(seen["seen"].values()) == [2] * 16
    assert seen["peaks"][("scope", "api")] <= 2


class ScopeWatcher:
    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        pass

    def on_run_end(self, info: corral.RunInfo) -> None:
        self.at_end = dict(info.scopes())


class Lock:
    def __init__(self) -> None:
        self.lock = threading.Lock()

    async def act(self, session: corral.AgentSession) -> corral.Final:
        return corral.Final(None)


@ASYNCIO
async def test_an_unpicklable_agent_is_refused_before_anything_runs(tmp_path: Path) -> None:
    env = BoardEnvironment(None, gauged=False)
    path = tmp_path / "store.db"
    r = corral.CorralRunner(tasks(2), {"agent": Lock()}, {"env0": env, "env1": env}, store=path)
    with pytest.raises(corral.ConfigError, match="agent 'agent'.*cannot be pickled"):
        await r.run("refused", executor=corral.RayExecutor(hosts=2))
    assert not path.exists()


@ASYNCIO
async def test_a_memory_store_and_hosts_that_cannot_fit_are_refused(tmp_path: Path) -> None:
    r = runner(None, corral.MemoryStore(), 2)
    with pytest.raises(corral.ConfigError, match="MemoryStore"):
        await r.run("refused", executor=corral.RayExecutor(hosts=1))
    path = tmp_path / "store.db"
    r = runner(None, path, 2)
    with pytest.raises(corral.ConfigError, match="3 hosts of num_cpus=1 need 3 CPUs"):
        await r.run("refused", executor=corral.RayExecutor(hosts=3))
    assert not path.exists()


def test_bad_executor_options_are_refused() -> None:
    for bad in (
        {"hosts": 0},
        {"trials_per_host": -1},
        {"address": ""},
        {"host_options": {"max_restarts": 3}},
        {"host_options": {"num_cpus": "one"}},
        {"log_file": 3},
        {"connect_timeout": 0},
    ):
        with pytest.raises(corral.ConfigError):
            corral.RayExecutor(**bad)
    with pytest.raises(corral.ConfigError, match="executor must be an Executor"):
        corral.CorralRunner({}, {}, {}, store=":memory:", executor="ray")  # type: ignore[arg-type]


def test_the_cli_runs_on_ray_hosts_with_the_same_report(tmp_path: Path, ray_cluster: None) -> None:
    from ..unit.test_cli import _bench, _invoke, _refused

    bench = _bench(tmp_path)
    local = _invoke("run", bench, "--store", tmp_path / "local.db", "--json")
    on_ray = _invoke(
        "run", bench, "--store", tmp_path / "ray.db", "--executor", "ray", "--hosts", "2", "--json"
    )
    assert local.exit_code == on_ray.exit_code == 0, on_ray.output
    assert json.loads(on_ray.stdout)["pass_at_k"] == json.loads(local.stdout)["pass_at_k"]
    assert "--executor ray" in _refused("run", bench, "--store", tmp_path / "x.db", "--hosts", "2")


@ASYNCIO
async def test_a_host_that_cannot_start_fails_the_run(tmp_path: Path) -> None:
    r = corral.CorralRunner(
        tasks(2, environments=1),
        {"agent": BoardAgent(None)},
        {"env0": OnlyHere()},
        store=tmp_path / "store.db",
    )
    with pytest.raises(
        corral.CorralError, match="(?s)could not start.*cannot be loaded on a host"
    ) as e:
        await r.run("unloadable", executor=corral.RayExecutor(hosts=1))
    assert "\x1b[" not in str(e.value)  # Ray's traceback, without its colours


@ASYNCIO
async def test_a_run_cost_limit_counts_what_hosts_spend(tmp_path: Path) -> None:
    """The run's spend is counted from the commits hosts send back (no observer asked)."""

    async def run(store: Path, executor: corral.RayExecutor) -> corral.BenchmarkReport:
        r = corral.CorralRunner(
            tasks(6, environments=1),
            {"agent": CostlyAgent()},
            {"env0": PlainEnvironment()},
            store=store,
        )
        return await r.run("spend", max_parallel=1, run_cost_limit=3.0, executor=executor)

    report = await run(tmp_path / "ray.db", corral.RayExecutor(hosts=2))
    assert report.stopped is not None and "run_cost_limit" in report.stopped
    # One trial at a time, and a host's commits reach the coordinator before the end of
    # the trial that made them: admission stopped right when the third one was recorded.
    assert report.counts["completed"] == 3
