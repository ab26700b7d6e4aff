"""The Ray executor under failure: the commits of killed hosts announced once, scopes that
outlive their host, a dead scope hub, a zombie host fenced off, trial timeouts on hosts."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

import corral
from corral import BenchmarkTaskMetadata, Commit, TrialKey
from corral.report._files import report_path

from ..support import pg
from ..support.ray_support import (
    BoardAgent,
    BoardEnvironment,
    Boards,
    LimitedOnceAgent,
    call,
    comparable,
    kill_at_the_gate,
    scope_hubs,
    tasks,
)

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.usefixtures("ray_cluster"),
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),
]


@pytest.fixture
def sqlite(tmp_path: Path) -> str:
    return str(tmp_path / "store.db")


@pytest.fixture
def postgres(pg_dsn: str) -> str:
    return pg_dsn


def runner(b: Any, store: Any, task_set: dict[str, BenchmarkTaskMetadata]) -> corral.CorralRunner:
    env = BoardEnvironment(b, gauged=False)
    return corral.CorralRunner(
        task_set, {"agent": BoardAgent(b)}, {"env0": env, "env1": env}, store=store
    )


RUN = {"trials_per_task": 2, "max_parallel": 4, "max_parallel_per_task": 1}


def scoped_runner(board: Any, store: str) -> corral.CorralRunner:
    """Six tasks whose agents hold the `concurrency` scope ``api`` (1) while they act."""
    env = BoardEnvironment(board, gauged=False)
    return corral.CorralRunner(
        tasks(6), {"agent": BoardAgent(board, scope=1)}, {"env0": env, "env1": env}, store=store
    )


class RunToFailure:
    """A run of ``runner`` on two Ray hosts expected to fail: its `CorralError` kept in
    ``failure``, ``stopped`` set once it returned."""

    def __init__(self, runner: corral.CorralRunner) -> None:
        self.runner = runner
        self.failure: BaseException | None = None
        self.stopped = anyio.Event()

    async def __call__(self) -> None:
        try:
            await self.runner.run("bench", **RUN, executor=corral.RayExecutor(hosts=2))
        except corral.CorralError as exc:
            self.failure = exc
        self.stopped.set()


async def reference(
    boards: Boards, tmp_path: Path, task_set: dict[str, BenchmarkTaskMetadata]
) -> Any:
    return await runner(boards.get(1), tmp_path / "reference.db", task_set).run("bench", **RUN)


# A host killed mid-run (ray.kill on PostgreSQL, SIGKILL on SQLite), dependencies and
# reflective trials across hosts, a cancelled run resumed: the executor contract's Ray
# cases (tests/contract/test_executor_contract.py).


class Announced:
    """An observer: how often it heard of each commit, and the run's spend at its end."""

    def __init__(self) -> None:
        self.heard: Counter[tuple[str, int, int]] = Counter()
        self.spent: float | None = None

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        self.heard[(key.task_id, key.trial, commit.seq)] += 1

    def on_run_end(self, info: Any) -> None:
        self.spent = info.spent()


async def stored(path: str) -> set[tuple[str, int, int]]:
    """Every commit of the benchmark ``bench`` of `tasks(6)`, as (task, trial, seq)."""
    store = corral.SQLiteStore(path, read_only=True)
    async with store.opened():
        return {
            (task_id, r, c.seq)
            for task_id in tasks(6)
            for r in range(2)
            for c in await store.history(TrialKey("bench", task_id, r))
        }


async def test_the_commits_of_killed_hosts_are_announced_once(sqlite: str, boards: Boards) -> None:
    """A run resumes the 4 trials an earlier one left half done, and both its hosts die
    before their first answer: what they made durable is read back, so observers hear
    of every commit of this run once (none of the earlier run's), and the run's spend
    is what the store holds."""
    gated = boards.get(gate_open=False)
    env = BoardEnvironment(gated, gauged=False)
    seen = Announced()
    costly = corral.CorralRunner(
        tasks(6),
        {"agent": BoardAgent(gated, cost=1.0)},
        {"env0": env, "env1": env},
        store=sqlite,
    )
    executor = corral.RayExecutor(hosts=2)
    with anyio.CancelScope() as scope:  # the earlier run: 4 setups and actions recorded
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: costly.run("bench", **RUN, executor=executor))
            await call(gated.wait_steps.remote(4))
            scope.cancel()
    earlier = await stored(sqlite)
    gated = boards.get(gate_open=False)  # the same board afresh: where this run's steps run
    report: corral.BenchmarkReport | None = None

    async def run() -> None:
        nonlocal report
        report = await costly.run(
            "bench", **RUN, run_cost_limit=100.0, executor=executor, observers=[seen]
        )

    await kill_at_the_gate(run, gated, 4)
    assert report is not None and report.counts["completed"] == 12
    assert seen.heard == Counter((await stored(sqlite)) - earlier)
    assert seen.spent == report.usage.cost == 12.0
    # The report file, from the records the hosts sent (trials continued after their
    # host died among them), is the one the store's records give.
    path = report_path(costly.store, "bench")
    assert path is not None and path.read_text() == json.dumps(report.to_dict()) + "\n"


async def test_a_deferred_trial_whose_host_died_counts_its_carried_usage_once(
    sqlite: str, boards: Boards
) -> None:
    """A trial rate limited after spending 1.0 goes on on a host, whose action commit
    carries that 1.0, and the host dies in the tool call: the trial goes on on a new
    host from the coordinator's copy of the deferred job, which carried the 1.0 too
    (it was counted twice: 2.0)."""
    gated = boards.get(gate_open=False)
    runner = corral.CorralRunner(
        {"t": BenchmarkTaskMetadata("agent", "env")},
        {"agent": LimitedOnceAgent()},
        {"env": BoardEnvironment(gated, gauged=False)},
        store=sqlite,
    )
    report: corral.BenchmarkReport | None = None

    async def run() -> None:
        nonlocal report
        report = await runner.run("bench", executor=corral.RayExecutor(hosts=1))

    await kill_at_the_gate(run, gated, 1)
    assert report is not None and report.counts["completed"] == 1
    assert report.usage.cost == 1.0


async def test_the_scopes_outlive_the_host_that_made_them(
    sqlite: str, tmp_path: Path, boards: Boards
) -> None:

    gated = boards.get(limits={("scope", "api"): 1}, gate_open=False)
    scoped = scoped_runner(gated, sqlite)
    report: corral.BenchmarkReport | None = None

    async def run() -> None:
        nonlocal report
        report = await scoped.run("bench", **RUN, executor=corral.RayExecutor(hosts=2))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await call(gated.wait_steps.remote(4))  # every agent has used the scope by now
        (scopes,) = scope_hubs()
        os.kill(await call(scopes.maker.remote()), signal.SIGKILL)
        await call(gated.open.remote())
    assert report is not None
    assert comparable(report) == comparable(await reference(boards, tmp_path, tasks(6)))
    seen = await call(gated.report.remote())
    assert seen["violations"] == [] and seen["peaks"][("scope", "api")] == 1
    assert not scope_hubs()


async def test_a_dead_scope_hub_stops_the_run_and_no_trial_is_an_error(
    sqlite: str, tmp_path: Path, boards: Boards
) -> None:
    """The hub is infrastructure: its death is not the agents' failure. The run stops,
    records no trial as an error, and a rerun resumes to the uninterrupted report."""
    import ray

    gated = boards.get(gate_open=False)
    scoped = scoped_runner(gated, sqlite)
    run = RunToFailure(scoped)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await call(gated.wait_steps.remote(4))  # each agent asks the hub again to answer
        (scopes,) = scope_hubs()
        ray.kill(scopes)
        await call(gated.open.remote())
    failure = run.failure
    assert failure is not None and "scope" in str(failure) and "again" in str(failure)
    assert "\x1b[" not in str(failure)
    store = corral.SQLiteStore(sqlite, read_only=True)
    async with store.opened():
        terminals = [
            c
            for task_id in tasks(6)
            for r in range(2)
            for c in await store.history(TrialKey("bench", task_id, r))
            if c.kind == "terminal"
        ]
    assert all(c.payload["status"] == "completed" for c in terminals)
    report = await scoped.run("bench", **RUN, executor=corral.RayExecutor(hosts=2))
    assert comparable(report) == comparable(await reference(boards, tmp_path, tasks(6)))


async def test_a_dead_scope_hub_stops_a_run_whose_agents_never_ask_it_again(
    sqlite: str, tmp_path: Path, boards: Boards
) -> None:
    """Before, only an agent asking the dead hub for a slot stopped the run: with every
    agent past its scope (here waiting at a gate), the run went on without its limits'
    keeper, and a host whose agents came to the scope later would have made a new,
    empty hub. The coordinator finds the hub dead by itself now."""
    import ray

    gated = boards.get(gate_open=False)
    scoped = scoped_runner(gated, sqlite)
    run = RunToFailure(scoped)
    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await call(gated.wait_steps.remote(4))  # past the scope, held at the gate
        (scopes,) = scope_hubs()
        ray.kill(scopes)
        try:
            with anyio.fail_after(60):  # the gate stays shut: nothing else stops the run
                await run.stopped.wait()
        finally:
            await call(gated.open.remote())
    failure = run.failure
    assert failure is not None and "scope hub" in str(failure) and "again" in str(failure)
    report = await scoped.run("bench", **RUN, executor=corral.RayExecutor(hosts=2))
    assert comparable(report) == comparable(await reference(boards, tmp_path, tasks(6)))


class LosesAnAnswer(corral.RayExecutor):
    """Two hosts; the coordinator loses host 0's first answer holding results on its way
    back, as Ray reports a host it cannot reach for the moment (a network partition):
    the host ran the call, and may well be running still."""

    def __init__(self) -> None:
        super().__init__(hosts=2)
        self.execution: Any = None
        self.lost = False

    def start(self, run: Any) -> Any:
        import ray

        execution = self.execution = super().start(run)
        arrived = execution._arrived

        def losing(host: Any, answer: Any) -> None:
            if not self.lost and host.index == 0 and type(answer) is tuple and answer[0]:
                self.lost = True
                answer = ray.exceptions.ActorUnavailableError("injected: answer lost", None)
            arrived(host, answer)

        execution._arrived = losing  # called on Ray's thread, as the real one
        return execution


async def test_a_host_only_unreachable_is_asked_again_not_replaced(
    sqlite: str, tmp_path: Path, boards: Boards
) -> None:
    """Before, Ray's ActorUnavailableError replaced the host as if it had died (killed,
    its trials sent on to a new one) though it may still be running and writing them.
    Now the poll goes again and the host answers it with the answer that was lost: no
    host is replaced, no result is lost, every step runs once."""
    board = boards.get(1)
    executor = LosesAnAnswer()
    report = await runner(board, sqlite, tasks(6)).run("bench", **RUN, executor=executor)
    steps = (await call(board.report.remote()))["steps"]
    assert executor.lost
    assert executor.execution._made == 2  # no host was replaced
    assert len(steps) == 12 and set(steps.values()) == {1}
    assert comparable(report) == comparable(await reference(boards, tmp_path, tasks(6)))


async def test_a_zombie_host_cannot_write_once_the_claim_moved(postgres: str) -> None:
    """A host writes under its coordinator's epoch; a new claim (the coordinator died, the
    benchmark was run again) fences it off."""
    coordinator, host, successor = (corral.PostgresStore(postgres) for _ in range(3))
    key = TrialKey("z", "t", 0)
    async with coordinator.opened(), host.opened(), coordinator.claim("z"):
        epoch = coordinator.claim_epoch("z")
        assert epoch is not None
        async with host.joined("z", epoch):
            await host.append(key, [Commit(0, "setup", {}, time.time())])
    # The coordinator is gone; the benchmark is run again, and its old host lives on.
    async with successor.opened(), successor.claim("z"):
        with pytest.raises(BaseException) as caught:  # its append fails, and its store with it
            async with host.opened(), host.joined("z", epoch):
                await host.append(key, [Commit(1, "terminal", {}, time.time())])
        assert all("claimed by another runner" in str(e) for e in pg.leaves(caught.value))
        assert [c.seq for c in await successor.history(key)] == [0]


@pytest.mark.parametrize("fold", ["folded", "refolded"])
async def test_a_host_its_coordinator_fenced_off_cannot_write(postgres: str, fold: str) -> None:
    """A host Ray said died may live on a while (its node cut off from the cluster):
    once its coordinator has fenced it off, its writes fail (on either of the writer's
    paths: a trial it folded from its start, or one it refolds from the store), another
    host writes on, and a new claim lifts the fence for the next run's hosts."""
    coordinator, zombie, other = (corral.PostgresStore(postgres) for _ in range(3))
    key, elsewhere = TrialKey("f", "t", 0), TrialKey("f", "u", 0)
    # The step ends the trial: a commit that changes a trial's head, so a trial the
    # zombie did not write from its start is refolded (the writer's second path).
    ended = {"status": "completed", "output": "done", "error": None, "attempts": 1, "state": None}
    setup, step = Commit(0, "setup", {}, time.time()), Commit(1, "terminal", ended, time.time())
    async with coordinator.opened(), other.opened():
        async with coordinator.claim("f"):
            epoch = coordinator.claim_epoch("f")
            assert epoch is not None
            if fold == "refolded":
                await coordinator.append(key, [setup])
            with pytest.raises(BaseException) as caught:  # its append fails, its store too
                async with zombie.opened(), zombie.joined("f", epoch, 0):
                    if fold == "folded":
                        await zombie.append(key, [setup])
                    await coordinator.fence_host("f", 0)
                    await zombie.append(key, [step])
            assert all("fenced it off" in str(e) for e in pg.leaves(caught.value))
            assert [c.seq for c in await coordinator.history(key)] == [0]
            async with other.joined("f", epoch, 1):
                await other.append(elsewhere, [setup])
        async with coordinator.claim("f"):  # the next run: its host 0 is a new one
            epoch = coordinator.claim_epoch("f")
            assert epoch is not None
            async with other.joined("f", epoch, 0):
                await other.append(key, [step])
        assert [c.seq for c in await coordinator.history(key)] == [0, 1]


@pytest.mark.parametrize("host", [-1, True, "0"])
async def test_a_host_number_that_is_not_one_is_refused(postgres: str, host: Any) -> None:
    store = corral.PostgresStore(postgres)
    with pytest.raises(corral.ConfigError, match=f"host's number .*{host!r}"):
        async with store.joined("f", 1, host):
            pass


async def test_fencing_a_host_waits_out_its_write_in_flight_and_says_so(
    postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host's write holds its row of the claim's writers share-locked until it commits
    (a host frozen mid-transaction holds it until the server ends its session): the
    fence waits for it, warning each time its lock timeout passes, and lands once the
    write is done."""
    import psycopg

    from corral.store import postgres as pg_store

    monkeypatch.setattr(pg_store, "_FENCE_WAIT_MS", 50)
    coordinator, host = corral.PostgresStore(postgres), corral.PostgresStore(postgres)
    with warnings_of("corral.store", "waits for its writes in flight") as warned:
        async with coordinator.opened(), host.opened(), coordinator.claim("w"):
            epoch = coordinator.claim_epoch("w")
            assert epoch is not None
            async with host.joined("w", epoch, 0):
                with psycopg.connect(postgres) as writing:  # host 0's write, mid-transaction
                    writing.execute(HOST_WRITING, ("w", epoch, 0))
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(coordinator.fence_host, "w", 0)
                        try:
                            assert await anyio.to_thread.run_sync(warned.wait, 30)
                        finally:
                            writing.commit()  # the write lands: the fence goes on
            assert fenced_hosts(postgres, "w") == [0]


async def test_fencing_a_host_does_not_wait_for_the_other_hosts_writes(
    postgres: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the fence updated the claim's row, which every host's write share-locks:
    it waited for all of them, and with many hosts writing at once one always held it
    (16 writers of 10 ms each starved it for over a minute, `lock_timeout` never
    firing: each wait was for another writer). The run's lost host stayed unfenced and
    its trials never went on. Now it waits for the fenced host's writes alone."""
    import psycopg

    from corral.store import postgres as pg_store

    monkeypatch.setattr(pg_store, "_FENCE_WAIT_MS", 50)
    coordinator = corral.PostgresStore(postgres)
    hosts = [corral.PostgresStore(postgres) for _ in range(3)]
    fenced = anyio.Event()

    async def fence() -> None:
        await coordinator.fence_host("o", 0)
        fenced.set()

    with warnings_of("corral.store", "waits for its writes in flight") as waited:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(coordinator.opened())
            await stack.enter_async_context(coordinator.claim("o"))
            epoch = coordinator.claim_epoch("o")
            assert epoch is not None
            for number, host in enumerate(hosts):  # host 0 too: its row is updated
                await stack.enter_async_context(host.opened())
                await stack.enter_async_context(host.joined("o", epoch, number))
            with psycopg.connect(postgres) as one, psycopg.connect(postgres) as two:
                one.execute(HOST_WRITING, ("o", epoch, 1))  # hosts 1 and 2 write
                two.execute(HOST_WRITING, ("o", epoch, 2))
                async with anyio.create_task_group() as tg:
                    tg.start_soon(fence)
                    try:
                        with anyio.move_on_after(20) as waiting:
                            await fenced.wait()
                    finally:
                        one.commit()  # (a fence that waits for them goes on, and returns)
                        two.commit()
            assert not waiting.cancelled_caught, "the fence waited for the other hosts' writes"
            assert not waited.is_set()
            await hosts[1].append(TrialKey("o", "t", 0), [Commit(0, "setup", {}, 1.0)])
    assert fenced_hosts(postgres, "o") == [0]


async def test_a_new_claim_refuses_the_old_hosts_writes_and_waits_only_for_those_in_flight(
    postgres: str,
) -> None:
    """Before, a new claim raised the epoch by updating the claim's row, which every
    write share-locks: the hosts of a coordinator that died (alive on a node cut off
    from the cluster) got their share locks in ahead of it as long as they kept
    writing, and the new run waited. Now the claim first fences every old writer off,
    a row at a time, each waiting for its one write in flight: a write that starts
    after that is refused at once and locks nothing."""
    import psycopg

    from corral.store._pg_writer import FENCE  # what every write checks, and locks

    old, successor = corral.PostgresStore(postgres), corral.PostgresStore(postgres)
    hosts = [corral.PostgresStore(postgres) for _ in range(2)]
    claimed, done, answered = anyio.Event(), anyio.Event(), anyio.Event()
    refused: list[Any] = []

    async def claim() -> None:
        async with successor.claim("n"):
            claimed.set()
            await done.wait()

    async def host_1_writes(one: Any, epoch: int) -> None:
        refused.extend(
            await anyio.to_thread.run_sync(
                lambda: one.execute(FENCE, (["n"], [epoch], [1])).fetchall()
            )
        )
        answered.set()

    async with contextlib.AsyncExitStack() as stack:
        for store in (old, successor, *hosts):
            await stack.enter_async_context(store.opened())
        async with old.claim("n"):
            epoch = old.claim_epoch("n")
            assert epoch is not None
            for number, host in enumerate(hosts, start=1):
                await stack.enter_async_context(host.joined("n", epoch, number))
        # The coordinator is gone; its hosts 1 and 2 live on, host 2 mid-write.
        with (
            psycopg.connect(postgres) as two,
            psycopg.connect(postgres, autocommit=True) as one,
        ):
            assert two.execute(FENCE, (["n"], [epoch], [2])).fetchall() == [("n",)]
            blocked_by = (
                "SELECT EXISTS (SELECT 1 FROM pg_stat_activity "
                "WHERE %s = ANY(pg_blocking_pids(pid)))"
            )
            async with anyio.create_task_group() as tg:
                tg.start_soon(claim)
                try:
                    # The claim waits for host 2's write in flight...
                    await anyio.to_thread.run_sync(
                        pg.wait_for_server, postgres, blocked_by, (two.info.backend_pid,)
                    )
                    tg.start_soon(host_1_writes, one, epoch)  # ... as host 1 writes again
                    with anyio.move_on_after(10):
                        await answered.wait()
                    in_time = answered.is_set()
                finally:
                    two.commit()  # host 2's write lands, before the claim
                with anyio.fail_after(20):
                    await claimed.wait()
                done.set()
    assert in_time, "host 1's write waited for the claim"
    assert refused == []  # refused: its row is fenced off


#: What a host's write holds while it is in flight: the claim's row and its own row of
#: the claim's writers, share-locked (as the writer's statement does).
HOST_WRITING = (
    "SELECT 1 FROM corral.claims c JOIN corral.claim_writers w ON w.benchmark_id = "
    "c.benchmark_id AND w.epoch = c.epoch WHERE c.benchmark_id = %s AND c.epoch = %s "
    "AND w.host = %s FOR SHARE OF c, w"
)


def fenced_hosts(postgres: str, benchmark_id: str) -> list[int]:
    import psycopg

    with psycopg.connect(postgres) as conn:
        rows = conn.execute(
            "SELECT host FROM corral.claim_writers WHERE benchmark_id = %s AND fenced "
            "ORDER BY host",
            (benchmark_id,),
        ).fetchall()
    return [host for (host,) in rows]


@contextlib.contextmanager
def warnings_of(logger: str, text: str) -> Iterator[threading.Event]:
    """An event set once ``logger`` warns with ``text`` in its message."""
    warned = threading.Event()

    class Warned(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if text in record.getMessage():
                warned.set()

    handler = Warned(logging.WARNING)
    logging.getLogger(logger).addHandler(handler)
    try:
        yield warned
    finally:
        logging.getLogger(logger).removeHandler(handler)


class StallingAgent:
    """Task ``stall`` never decides (it honours cancellation); the others answer at once."""

    async def act(self, session: corral.AgentSession) -> Any:
        if session.task_id == "stall":
            await anyio.sleep_forever()
        return corral.Final(session.task_id)


class ScoringEnvironment:
    async def setup(self, session: corral.AgentSession) -> None:
        return None

    async def execute(self, action: corral.Action, session: corral.AgentSession) -> Any:
        raise AssertionError("no tool is called")

    async def evaluate(self, trial: corral.TrialRecord) -> corral.Evaluation:
        return corral.Evaluation(score=1.0, passed=trial.output is not None)


async def test_trial_timeout_holds_on_hosts(sqlite: str) -> None:
    task_set = {
        name: BenchmarkTaskMetadata(agent_id="a", environment_id="e") for name in ("stall", "ok")
    }
    runner = corral.CorralRunner(
        task_set,
        {"a": StallingAgent()},
        {"e": ScoringEnvironment()},
        store=sqlite,
        trial_timeout=1.0,
    )
    report = await runner.run(
        "timeouts", trials_per_task=2, max_parallel=4, executor=corral.RayExecutor(hosts=2)
    )
    assert [str(t.status) for t in report.tasks["stall"].trials] == ["timeout", "timeout"]
    assert [str(t.status) for t in report.tasks["ok"].trials] == ["completed", "completed"]
    assert all(t.evaluation is not None for t in report.tasks["stall"].trials)  # evaluated
