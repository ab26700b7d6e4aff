"""A run cancelled keeps the usage no model call carries, and a retried attempt's error.

Usage recorded without a model call (``session.record_usage``: a tool reporting its own
spend) and the error of an attempt that made no call are carried in memory until the
trial's next commit. A run cancelled first lands them as a ``usage`` commit, so the
resumed run's report, ``corral show`` and the trial's budgets count them.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from trio.testing import MockClock

import corral
from corral import Final, MemoryStore
from corral.testing import LaggingStore, wait_all_tasks_blocked

from ..support.cancelled_run import Backoff, cancelled_when, history_of, one_task, store_of


class _SpendsThenHangs:
    """Records usage no model call carries, then waits inside ``act()`` until cancelled;
    resumed, answers at once."""

    def __init__(self) -> None:
        self.inside = anyio.Event()
        self.calls = 0

    async def act(self, session: corral.AgentSession) -> Final:
        self.calls += 1
        if self.calls == 1:
            session.record_usage(input_tokens=100, output_tokens=10, cost=0.5)
            self.inside.set()
            await anyio.sleep_forever()
        return Final("done")


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_run_cancelled_inside_act_keeps_the_usage_no_call_carries(
    kind: str, tmp_path: Any
) -> None:
    """The usage was only in memory: the resumed run's report counted none of it."""
    from corral.cli._inspect import rebuild_report

    store = store_of(kind, tmp_path)
    agent = _SpendsThenHangs()
    await cancelled_when(one_task(store, agent).run, agent.inside)
    landed = await history_of(store)
    assert [c.kind for c in landed] == ["setup", "usage"]
    assert landed[-1].usage.input_tokens == 100
    report = await one_task(store, agent).run("b")
    trial = report.tasks["t"].trials[0]
    assert (trial.status, trial.output, trial.attempts) == ("completed", "done", 1)
    assert (trial.usage.input_tokens, trial.usage.output_tokens) == (100, 10)
    assert trial.usage.cost == pytest.approx(0.5)
    async with store.opened():
        shown = await rebuild_report(store, "b")
    assert shown.usage.input_tokens == 100
    assert [c.kind for c in await history_of(store)] == ["setup", "usage", "terminal", "evaluation"]


@pytest.mark.anyio
async def test_a_trials_token_budget_counts_the_usage_of_a_run_cancelled_inside_act() -> None:
    """Resumed, a trial that had spent past its token_limit went on as if it had not."""
    store = MemoryStore()
    agent = _SpendsThenHangs()
    await cancelled_when(one_task(store, agent, token_limit=50).run, agent.inside)
    trial = (await one_task(store, agent, token_limit=50).run("b")).tasks["t"].trials[0]
    assert (trial.status, trial.usage.input_tokens) == ("limit", 100)
    assert agent.calls == 1  # never asked again


@pytest.mark.anyio
async def test_a_run_cancelled_inside_act_with_nothing_spent_writes_no_usage_commit() -> None:
    store = MemoryStore()

    class Hangs:
        inside = anyio.Event()

        async def act(self, session: corral.AgentSession) -> Final:
            self.inside.set()
            await anyio.sleep_forever()
            raise AssertionError

    agent = Hangs()
    await cancelled_when(one_task(store, agent).run, agent.inside)
    assert [c.kind for c in await history_of(store)] == ["setup"]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("spent", [True, False])
async def test_a_run_cancelled_during_the_backoff_of_an_attempt_without_calls_keeps_it(
    kind: str, spent: bool, tmp_path: Any
) -> None:
    """An attempt that made no model call (perhaps spending through a tool) fails; the
    run is cancelled during its retry's backoff. Its error and usage were carried only
    in memory: the resumed trial counted one attempt and nothing spent."""
    from corral.cli._inspect import rebuild_report

    store = store_of(kind, tmp_path)

    class SpendsThenFails:
        calls = 0

        async def act(self, session: corral.AgentSession) -> Final:
            self.calls += 1
            if self.calls == 1:
                if spent:
                    session.record_usage(input_tokens=100, cost=0.5)
                raise RuntimeError("flaky agent")
            return Final("done")

    agent = SpendsThenFails()
    policy = Backoff()
    await cancelled_when(one_task(store, agent, policy).run, policy.waiting)  # type: ignore[attr-defined]
    landed = await history_of(store)
    assert [c.kind for c in landed] == ["setup", "usage"]
    assert "flaky agent" in str(landed[-1].payload["failed_attempts"])
    report = await one_task(store, agent, policy).run("b")
    trial = report.tasks["t"].trials[0]
    assert (trial.status, trial.output, trial.attempts) == ("completed", "done", 2)
    assert trial.usage.input_tokens == (100 if spent else 0)
    ended = next(c for c in await history_of(store) if c.kind == "terminal")
    assert "flaky agent" in str(ended.payload["failed_attempts"])
    async with store.opened():
        shown = await rebuild_report(store, "b")
    assert shown.usage.input_tokens == (100 if spent else 0)


class _Waits(corral.RetryPolicy):
    """Tells when a trial is deferred by a rate limit (its wait 1000 s)."""

    def __init__(self) -> None:
        super().__init__(max_retries=0, max_rate_limit_wait=1000)
        object.__setattr__(self, "waiting", anyio.Event())

    def rate_limit_wait(self, retry_after: float | None, deferrals: int) -> float:
        self.waiting.set()  # type: ignore[attr-defined]
        return super().rate_limit_wait(retry_after, deferrals)


class SpendsThenLimited:
    """Records usage without a model call, then is rate limited (told to wait
    ``retry_after`` seconds); answers on its next turn."""

    def __init__(self, retry_after: float) -> None:
        self.retry_after = retry_after
        self.calls = 0

    async def act(self, session: corral.AgentSession) -> Final:
        self.calls += 1
        if self.calls == 1:
            session.record_usage(input_tokens=100, cost=0.5)
            raise corral.RateLimited("429", retry_after=self.retry_after)
        return Final("done")


# The clock jumps only after a second of real idleness: the landing waits for the SQLite
# thread under its grace's deadline, which a jump at once would reach before the thread.
@pytest.mark.parametrize("anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=1)})])
@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_run_cancelled_while_a_trial_waits_out_a_rate_limit_keeps_its_usage(
    kind: str, tmp_path: Any
) -> None:
    """A trial spends without a model call, then is rate limited; the run is cancelled
    while it waits (the trial in the scheduler, not running). Its usage rode with the
    waiting job only: the resumed run counted none of it. An uncancelled deferral writes
    no commit of it (the trial goes on, its next commit carries it)."""
    store = store_of(kind, tmp_path)

    agent = SpendsThenLimited(retry_after=1000)
    policy = _Waits()
    async with anyio.create_task_group() as tg:
        tg.start_soon(one_task(store, agent, policy).run, "b")
        await policy.waiting.wait()  # type: ignore[attr-defined]
        await anyio.sleep(1)  # virtual: every task idle, the trial waiting in the scheduler
        assert [c.kind for c in await store.history(corral.TrialKey("b", "t", 0))] == ["setup"]
        tg.cancel_scope.cancel()
    landed = await history_of(store)
    assert [c.kind for c in landed] == ["setup", "usage"]
    trial = (await one_task(store, agent, policy).run("b")).tasks["t"].trials[0]
    assert (trial.status, trial.output, trial.attempts) == ("completed", "done", 1)
    assert trial.usage.input_tokens == 100 and trial.usage.cost == pytest.approx(0.5)


@pytest.mark.parametrize("anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=0)})])
@pytest.mark.anyio
async def test_a_deferred_trial_not_cancelled_writes_no_usage_commit() -> None:
    """The usage rides to the trial's next commit: no commit of its own shifts the step
    keys of its later actions."""
    store = MemoryStore()

    class SpendsLimitedThenSteps:
        calls = 0

        async def act(self, session: corral.AgentSession) -> Any:
            self.calls += 1
            if self.calls == 1:
                session.record_usage(input_tokens=100)
                raise corral.RateLimited("429", retry_after=5)
            if self.calls == 2:
                return corral.Action("step", {})
            return Final("done")

    agent = SpendsLimitedThenSteps()
    trial = (await one_task(store, agent, _Waits()).run("b")).tasks["t"].trials[0]
    assert (trial.status, trial.usage.input_tokens) == ("completed", 100)
    kinds = [c.kind for c in await history_of(store)]
    assert kinds == ["setup", "action", "tool_effect", "terminal", "evaluation"]


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_every_reader_shows_a_usage_commit(tmp_path: Any) -> None:
    """``corral show`` says what was spent, the viewer's timeline and export list it, the
    transcript and an agent's conversation leave it out; a trial cancelled inside a
    parallel turn applies its effects in declared order around it."""
    import io

    from rich.console import Console

    from corral import history
    from corral._turns import declared_order
    from corral.agents._conversation import conversation
    from corral.cli._history import load_history, render_history
    from corral.view._export import export_data
    from corral.view._timeline import timeline
    from corral.view._transcript import transcript_data

    store = store_of("sqlite", tmp_path)
    agent = _SpendsThenHangs()
    await cancelled_when(one_task(store, agent).run, agent.inside)
    async with store.opened():
        loaded = await load_history(store, "b", "t", 0)
        exported = await export_data(store, "b")
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render_history(loaded))
    shown = " ".join(console.export_text().split())
    assert "usage +" in shown and "run cancelled · spent 100+10 tok" in shown
    assert "without a model call" in shown
    commits = loaded.commits
    entry = timeline(commits)[-1]
    assert (entry["kind"], entry["usage"]["input_tokens"]) == ("usage", 100)
    page = exported["trials"]["t\u00000"]
    assert [c["kind"] for c in page["timeline"]] == ["setup", "usage"]
    assert transcript_data(commits) == []
    payload = history.decode(commits[-1])
    assert isinstance(payload, history.UsagePayload) and payload.stamp.worked is not None
    assert history.encode(payload) == commits[-1].payload
    # A parallel turn (actions 1 and 2): effect 2, the cancel's usage, then effect 1.
    made = [
        corral.Commit(0, "setup", {"state": None}, 0.0),
        corral.Commit(1, "action", {"tool": "a", "turn": 0, "index": 0}, 0.0),
        corral.Commit(2, "action", {"tool": "b", "turn": 0, "index": 1}, 0.0),
        corral.Commit(3, "tool_effect", {"action_seq": 2, "observation": "b"}, 0.0),
        corral.Commit(4, "usage", {"worked": 1.0}, 0.0, corral.Usage(5, 0, 0.0)),
        corral.Commit(5, "tool_effect", {"action_seq": 1, "observation": "a"}, 0.0),
    ]
    assert [c.seq for c in declared_order(made)] == [0, 1, 2, 5, 3, 4]

    class Session:
        history = made

    sent = conversation(Session(), None, "go")  # type: ignore[arg-type]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]


@pytest.mark.anyio
async def test_a_run_cancelled_while_a_failed_attempt_reads_its_history_keeps_its_usage() -> None:
    """An attempt spends without a model call and fails; the run is cancelled while the
    trial reads its history back (before its retry's backoff). The usage, taken from the
    session by then, was lost: the resumed report counted none of it."""

    class Reading(MemoryStore):
        reading = anyio.Event()

        async def history(self, key: corral.TrialKey) -> list[corral.Commit]:
            if not self.reading.is_set():
                self.reading.set()
                await anyio.sleep_forever()  # until the run is cancelled
            return await super().history(key)

    class SpendsThenFails:
        calls = 0

        async def act(self, session: corral.AgentSession) -> Final:
            self.calls += 1
            if self.calls == 1:
                session.record_usage(input_tokens=100, cost=0.5)
                raise RuntimeError("flaky agent")
            return Final("done")

    store = Reading()
    agent = SpendsThenFails()
    await cancelled_when(
        one_task(store, agent, corral.RetryPolicy(max_retries=1)).run, store.reading
    )
    landed = await history_of(store)
    assert [c.kind for c in landed] == ["setup", "usage"]
    assert landed[-1].usage.input_tokens == 100
    trial = (await one_task(store, agent).run("b")).tasks["t"].trials[0]
    assert (trial.status, trial.usage.input_tokens) == ("completed", 100)


class _FailsOnce:
    """Its first attempt fails (a retryable error), spending 100 tokens first if
    ``spent``; retried, answers at once."""

    def __init__(self, spent: bool = False) -> None:
        self.spent = spent
        self.calls = 0

    async def act(self, session: corral.AgentSession) -> Final:
        self.calls += 1
        if self.calls == 1:
            if self.spent:
                session.record_usage(input_tokens=100, cost=0.5)
            raise RuntimeError("flaky agent")
        return Final("done")


@pytest.mark.anyio
@pytest.mark.parametrize("spent", [True, False])
async def test_a_run_cancelled_while_a_failed_attempt_reads_its_history_keeps_its_error(
    spent: bool,
) -> None:
    """An attempt fails; the run is cancelled while the trial reads its history back.
    Its error, known by then, was not yet among the failed attempts: the resumed trial
    counted one attempt, and neither its terminal nor `corral show` named the failure
    (as they do when the cancel comes during the backoff)."""

    class Reading(MemoryStore):
        reading = anyio.Event()

        async def history(self, key: corral.TrialKey) -> list[corral.Commit]:
            if not self.reading.is_set():
                self.reading.set()
                await anyio.sleep_forever()  # until the run is cancelled
            return await super().history(key)

    store = Reading()
    agent = _FailsOnce(spent)
    policy = corral.RetryPolicy(max_retries=1)
    await cancelled_when(one_task(store, agent, policy).run, store.reading)
    landed = await history_of(store)
    assert [c.kind for c in landed] == ["setup", "usage"]
    assert "flaky agent" in str(landed[-1].payload["failed_attempts"])
    trial = (await one_task(store, agent, policy).run("b")).tasks["t"].trials[0]
    assert (trial.status, trial.attempts) == ("completed", 2)
    ended = next(c for c in await history_of(store) if c.kind == "terminal")
    assert "flaky agent" in str(ended.payload["failed_attempts"])


@pytest.mark.anyio
async def test_a_run_cancelled_while_a_failed_attempt_drains_keeps_its_error() -> None:
    """The same, the cancel coming while the failed attempt waits for its setup to land."""
    store = LaggingStore()  # the setup's append held until the test releases it
    agent = _FailsOnce()
    ended = anyio.Event()

    async def run() -> None:
        try:
            await one_task(store, agent, corral.RetryPolicy(max_retries=1)).run("b")
        finally:
            ended.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await wait_all_tasks_blocked()
        assert agent.calls == 1 and store.held  # failed; its setup not yet durable
        tg.cancel_scope.cancel()
        with anyio.CancelScope(shield=True):
            while not ended.is_set():
                await wait_all_tasks_blocked()
                store.release()
    landed = await history_of(store)
    assert [c.kind for c in landed] == ["setup", "usage"]
    assert "flaky agent" in str(landed[-1].payload["failed_attempts"])


@pytest.mark.anyio
async def test_a_run_cancelled_as_a_worker_delivers_keeps_the_deferred_trial_it_admitted() -> None:
    """One slot: trial ``t`` spends, is rate limited and waits; trial ``u`` takes the
    slot, and ``t`` is ready again before ``u`` ends. The run is cancelled as ``u``'s
    worker delivers its end, which hands ``t``'s job to that worker: it left the
    scheduler's deferred trials (which a cancelled run lands) for the worker, which
    dropped it at its cancellation check, with the usage it carried."""
    store = MemoryStore()
    gate = anyio.Event()

    class Agent:
        calls = 0

        async def act(self, session: corral.AgentSession) -> Final:
            if session.task_id == "u":
                await gate.wait()
                return Final("done")
            self.calls += 1
            if self.calls == 1:
                session.record_usage(input_tokens=100, cost=0.5)
                raise corral.RateLimited("429", retry_after=0)
            return Final("done")

    policy = _Waits()
    runner = corral.CorralRunner(
        {k: corral.BenchmarkTaskMetadata("a", "e") for k in ("t", "u")},
        {"a": Agent()},
        {"e": corral.testing.FakeEnvironment()},
        store=store,
        retry_policy=policy,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: runner.run("b", max_parallel=1))
        await policy.waiting.wait()  # type: ignore[attr-defined]
        await wait_all_tasks_blocked()  # t's wait is over, and t waits for u's slot
        gate.set()  # u's act returns, and its worker delivers before it waits again
        tg.cancel_scope.cancel()
    assert [c.kind for c in await history_of(store)] == ["setup", "usage"]


@pytest.mark.anyio
async def test_a_run_cancelled_as_a_deferred_trial_reads_its_history_keeps_its_usage() -> None:
    """A rate-limited trial's wait is over: it goes on, reading its history first, and
    the run is cancelled during that read. Its usage rode with its job only, which had
    left the run's waiting trials: the resumed run counted none of it."""

    class HoldsTheRead(MemoryStore):
        reads = 0
        reading = anyio.Event()

        async def history(self, key: corral.TrialKey) -> list[corral.Commit]:
            self.reads += 1
            if self.reads == 1:  # the deferred trial's, as it goes on
                self.reading.set()
                await anyio.sleep_forever()
            return await super().history(key)

    store = HoldsTheRead()
    await cancelled_when(
        one_task(store, SpendsThenLimited(retry_after=0), _Waits()).run, store.reading
    )
    landed = await history_of(store)
    assert [c.kind for c in landed] == ["setup", "usage"]
    assert landed[-1].usage.input_tokens == 100


@pytest.mark.anyio
async def test_a_deferred_job_whose_host_went_on_lands_its_usage_once() -> None:
    """A trial deferred at seq 1 went on on a Ray host, whose first commit carried the
    job's usage before the host died; the coordinator's copy of the job still carries
    it. Cancelled then, the run landed that usage a second time (``run_trial`` already
    knew the history past the wait had it)."""
    from corral.runtime._acks import Acks
    from corral.runtime._jobs import TrialJob
    from corral.runtime._trial import land_deferred

    key = corral.TrialKey("b", "t", 0)
    spent = corral.Usage(100, 0, 0.5)
    store = MemoryStore()
    async with store.opened():
        await store.append(key, [corral.Commit(0, "setup", {"state": None}, 1.0)])
        # The host's first commit after the wait, carrying the job's usage.
        await store.append(key, [corral.Commit(1, "usage", {}, 2.0, spent)])
        job = TrialJob(0, 0, "t", corral.BenchmarkTaskMetadata("a", "e"), {})
        job.deferrals, job.deferred_at, job.carried_usage = 1, 1, spent
        await land_deferred(job, key, store, Acks(None))
        landed = await store.history(key)
    assert sum(c.usage.input_tokens for c in landed) == 100, landed
