"""The Ray executor end to end on a local Ray (2 CPUs, 2 hosts): what only Ray has (scopes
and host capacity across hosts, what is refused before anything runs, the CLI's
``--executor ray``, a run's spend counted from the hosts' commits)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

import corral

from ..support.ray_support import (
    BoardAgent,
    BoardEnvironment,
    Boards,
    CostlyAgent,
    HostScorer,
    LockInScratch,
    OnlyHere,
    PlainEnvironment,
    ScopeAtTheGate,
    SubprocessBoundAgent,
    SubprocessBoundScorer,
    call,
    scope_hubs,
    tasks,
)

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("ray_cluster")]

ASYNCIO = pytest.mark.parametrize("anyio_backend", ["asyncio"])


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


# Every limit at every instant across hosts, the report and the observers' commits equal
# to the in-process run's (PostgreSQL/asyncio, SQLite/trio), dependencies and reflective
# trials, retries, a cancelled run resumed and a host lost mid-trial: the executor
# contract's Ray cases (tests/contract/test_executor_contract.py), run once there.


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


def test_ray_address_local_starts_ray_with_no_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """``RAY_ADDRESS=local`` asks Ray to start a local instance, as no address does: that
    start had connect_timeout as a deadline (a slow start refused as 'could not join the
    Ray cluster at 'local' (RAY_ADDRESS)'), where a local start takes as long as it takes."""
    from corral.executor._owner import RayOwner

    timeouts: list[float | None] = []

    def init(self: RayOwner, ray: Any, timeout: float | None, **options: Any) -> None:
        timeouts.append(timeout)
        raise RuntimeError("no Ray here")

    monkeypatch.setattr(RayOwner, "init", init)
    monkeypatch.setattr("ray.is_initialized", lambda: False)
    monkeypatch.setenv("RAY_ADDRESS", "local")
    with pytest.raises(corral.ConfigError, match="could not start Ray: RuntimeError"):
        corral.RayExecutor(connect_timeout=1).connect()
    assert timeouts == [None]


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
    # A rescore scores on the hosts too (it had no --executor: it scored here).
    again = _invoke(
        "rescore", "bench", bench, "--store", tmp_path / "ray.db", "--executor", "ray", "--json"
    )
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["pass_at_k"] == json.loads(local.stdout)["pass_at_k"]
    ray_db = tmp_path / "ray.db"
    assert "--executor ray" in _refused(
        "rescore", "bench", bench, "--store", ray_db, "--hosts", "2"
    )


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


@ASYNCIO
async def test_hosts_the_cluster_cannot_place_are_refused_as_too_many_cpus_are(
    tmp_path: Path, boards: Boards
) -> None:
    """A host asking for a resource no node has (a GPU, a custom resource) would never
    start, nor its trials: refused before anything runs, as hosts wanting more CPUs than
    the cluster has are, rather than a run that waits for good."""
    board = boards.get(0)
    store = tmp_path / "store.db"
    for options, named in (
        ({"resources": {"no_node_has_this": 1}}, "no_node_has_this"),
        ({"num_gpus": 1}, "GPU"),
    ):
        executor = corral.RayExecutor(hosts=1, host_options=options)
        with anyio.fail_after(30), pytest.raises(corral.ConfigError, match=named):
            await runner(board, store, 1).run("unplaceable", executor=executor)


@ASYNCIO
async def test_a_rescore_scores_on_the_runner_s_ray_hosts(tmp_path: Path) -> None:
    """A runner built with a `RayExecutor` scored its run on the hosts, and its rescore in
    this process (where a scorer needing the hosts' sandbox or GPU fails every trial)."""
    r = corral.CorralRunner(
        tasks(2, environments=1),
        {"agent": CostlyAgent()},
        {"env0": HostScorer()},
        store=tmp_path / "store.db",
        executor=corral.RayExecutor(hosts=1),
    )
    assert (await r.run("scored")).pass_at_k[1] == 1.0
    assert (await r.rescore("scored")).pass_at_k[1] == 1.0


@ASYNCIO
async def test_a_deferred_trial_whose_scratch_cannot_travel_fails_alone(tmp_path: Path) -> None:
    """A rate limit defers a trial, scratch and all, which goes back to the coordinator:
    one that cannot be pickled failed the host's answer, and with it the whole run."""
    r = corral.CorralRunner(
        tasks(3, environments=1),
        {"agent": LockInScratch()},
        {"env0": PlainEnvironment()},
        store=tmp_path / "store.db",
    )
    report = await r.run("scratch", executor=corral.RayExecutor(hosts=1))
    assert (report.counts["completed"], report.counts["error"]) == (2, 1)
    error = report.tasks["t0"].trials[0].error
    assert error is not None and "session.scratch" in error and "lock" in error, error


@ASYNCIO
async def test_the_given_scopes_bound_subprocesses_on_the_hosts(tmp_path: Path) -> None:
    """``run(..., scopes=ConcurrencyScopes(max_subprocesses=N))`` bounds each host's
    `corral.subprocess` calls (its agents' and its scorers', in a run and a rescore) to N,
    as ``max_subprocesses=N`` does and as N bounds them in process. Before: only the
    setting reached the hosts, and the given scopes' N was dropped for the hosts' CPUs."""
    n = 13  # no host's CPUs
    r = corral.CorralRunner(
        tasks(2, environments=1),
        {"agent": SubprocessBoundAgent()},
        {"env0": SubprocessBoundScorer()},
        store=tmp_path / "store.db",
        executor=corral.RayExecutor(hosts=1),
    )
    scopes = corral.ConcurrencyScopes(max_subprocesses=n)
    report = await r.run("bound", scopes=scopes)
    trials = [t for task in report.tasks.values() for t in task.trials]
    assert [(t.output, t.evaluation and t.evaluation.score) for t in trials] == [(n, n)] * 2
    rescored = await r.rescore("bound", scopes=scopes)
    trials = [t for task in rescored.tasks.values() for t in task.trials]
    assert [t.evaluation and t.evaluation.score for t in trials] == [n] * 2


@ASYNCIO
async def test_runs_on_ray_given_the_same_scopes_share_each_scope_s_limit(
    tmp_path: Path, boards: Boards
) -> None:
    """Two Ray runs given one `ConcurrencyScopes` hold at most ``limit`` slots of a scope
    between them, as two in-process runs do; a run in this process given it meanwhile is
    refused before anything runs (its scopes could not be shared with the hosts'); and
    the registry tells each scope's use once they are over. Before: each Ray run made a
    scope hub of its own, so each had the whole limit (two holders of a scope of 1), and
    the registry stayed empty."""

    board = boards.get(0, {("scope", "api"): 1}, gate_open=False)
    shared = corral.ConcurrencyScopes()
    env = PlainEnvironment()

    def gated(name: str) -> corral.CorralRunner:
        return corral.CorralRunner(
            tasks(1, environments=1),
            {"agent": ScopeAtTheGate(board)},
            {"env0": env},
            store=tmp_path / f"{name}.db",
        )

    reports: list[corral.BenchmarkReport] = []

    async def run(name: str) -> None:
        executor = corral.RayExecutor(hosts=1)
        reports.append(await gated(name).run(name, scopes=shared, executor=executor))

    async def two_holders_or_one_waiting() -> None:
        """Until both agents hold the scope (each run with a limit of its own: the gauge
        finds it held twice) or one waits for the other's slot (the runs share it)."""
        while not (await call(board.report.remote()))["violations"]:
            for hub in scope_hubs():
                if hub is None:  # not registered yet
                    continue
                api = (await call(hub.statistics.remote())).get("api")
                if api is not None and api.waiting:
                    return
            await anyio.sleep(0.01)

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "a")
            tg.start_soon(run, "b")
            await call(board.wait_steps.remote(1))
            await two_holders_or_one_waiting()
            here = tmp_path / "here.db"
            with pytest.raises(
                corral.ConfigError, match="(?s)ConcurrencyScopes.*in use by a run on Ray hosts"
            ):
                await corral.CorralRunner(
                    tasks(1, environments=1), {"agent": CostlyAgent()}, {"env0": env}, store=here
                ).run("here", scopes=shared)
            assert not here.exists()
            await call(board.open.remote())
    seen = await call(board.report.remote())
    assert seen["violations"] == [] and seen["peaks"][("scope", "api")] == 1
    assert [r.counts["completed"] for r in reports] == [1, 1]
    api = shared.statistics()["api"]
    assert (api.limit, api.in_use, api.waiting, api.peak) == (1, 0, 0, 1)
    assert not scope_hubs()
