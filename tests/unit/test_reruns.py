"""Reruns: what a trial run again sees of the ones before it, and what the report
counts while reopened trials have not ended again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral import Evaluation, Final, MemoryStore, TrialRecord
from corral.runtime import AgentSession
from corral.testing import FakeEnvironment

pytestmark = pytest.mark.anyio

NO_BACKOFF = corral.RetryPolicy(max_retries=0, backoff_base=0)


async def test_a_rerun_unreachable_childs_next_trial_sees_its_new_previous_evaluation() -> None:
    """A parent errored in both rounds, so its child's two (reflective) trials ended
    unreachable. After ``rerun=("error",)`` both rounds of the child run again; with
    max_parallel_per_task=1 the child's trial 1 must see trial 0's *new* evaluation
    as previous_evaluation (spec 3.3), not the stale unreachable record's None."""
    store = MemoryStore()
    broken = {True}
    seen: dict[tuple[str, int], Any] = {}

    class Agent:
        async def act(self, session: AgentSession) -> Final:
            if session.task_id == "p" and broken:
                raise RuntimeError("broken parent")
            seen[(session.task_id, session.trial)] = session.previous_evaluation
            return Final(session.trial)

    def evaluate(r: TrialRecord) -> Evaluation:
        return Evaluation(1.0, True, {"task": r.task_id, "trial": r.trial})

    tasks = {"p": Meta("a", "e"), "c": Meta("a", "e", dependencies=("p",))}

    def make() -> corral.CorralRunner:
        env = FakeEnvironment(evaluate=evaluate)
        return corral.CorralRunner(
            tasks, {"a": Agent()}, {"e": env}, store=store, retry_policy=NO_BACKOFF
        )

    first = await make().run("b", trials_per_task=2, k_values=(1,))
    assert [t.status for t in first.tasks["c"].trials] == ["unreachable", "unreachable"]

    broken.clear()
    again = await make().run("b", trials_per_task=2, k_values=(1,), rerun=("error",))
    assert [t.status for t in again.tasks["c"].trials] == ["completed", "completed"]
    assert seen[("c", 0)] is None
    assert seen[("c", 1)] == Evaluation(1.0, True, {"task": "c", "trial": 0})


class Flaky:
    """Raises on the trials in ``broken``; records a cost on every call."""

    def __init__(self, broken: set[int]) -> None:
        self.broken = broken
        self.asked: list[int] = []

    async def act(self, session: AgentSession) -> Final:
        self.asked.append(session.trial)
        session.record_usage(input_tokens=1, output_tokens=1, cost=1.0)
        if session.trial in self.broken:
            raise RuntimeError("broken agent")
        return Final(session.trial)


def _flaky_runner(agent: Flaky, store: corral.CommitStore) -> corral.CorralRunner:
    return corral.CorralRunner(
        {"t": Meta("a", "e")},
        {"a": agent},
        {"e": FakeEnvironment()},
        store=store,
        retry_policy=NO_BACKOFF,
    )


async def test_a_rerun_stopped_before_its_trials_ran_does_not_drop_their_failures() -> None:
    """A rerun whose run stops before the reopened trial runs (here: run_cost_limit
    already reached) must not make pass@k jump: the failed trial is still a failure
    until a new attempt ends, not silently left out (which picks the passing trials:
    the bias the README says reruns never introduce)."""
    store = MemoryStore()
    agent = Flaky({1})
    first = await _flaky_runner(agent, store).run("b", trials_per_task=3, k_values=(1, 3))
    assert [t.status for t in first.tasks["t"].trials] == ["completed", "error", "completed"]
    assert first.pass_at_k[1] == pytest.approx(2 / 3)

    agent.asked.clear()
    again = await _flaky_runner(agent, store).run(
        "b", trials_per_task=3, k_values=(1, 3), rerun=("error",), run_cost_limit=1.0
    )
    assert again.stopped is not None and agent.asked == []  # nothing ran
    # Nothing new is known: the figures are those of the run before.
    assert again.pass_at_k == first.pass_at_k
    assert again.tasks["t"].pass_at_k == first.tasks["t"].pass_at_k


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_rerun_cancelled_mid_attempt_does_not_drop_its_trial_from_n(
    kind: str, tmp_path: Path
) -> None:
    """A rerun cancelled (Ctrl-C) while its reopened trial runs: the new attempt has
    not ended, so nothing new is known of the trial, and its earlier attempt stays
    counted (in ``corral report`` and in the next run's report, stopped before it could
    run the trial), as for a rerun stopped before the trial started. Left out of n,
    the failure vanished: pass@1 went from 0.67 to 1.0."""
    import anyio

    from corral.cli._inspect import rebuild_report

    store: corral.CommitStore = (
        MemoryStore() if kind == "memory" else corral.SQLiteStore(tmp_path / "s.db")
    )
    agent = Flaky({1})
    first = await _flaky_runner(agent, store).run("b", trials_per_task=3, k_values=(1, 3))
    assert [t.status for t in first.tasks["t"].trials] == ["completed", "error", "completed"]
    started = anyio.Event()

    class Hangs(Flaky):
        async def act(self, session: AgentSession) -> Final:
            session.record_usage(cost=1.0)
            started.set()
            await anyio.sleep_forever()
            raise AssertionError("unreachable")

    async with anyio.create_task_group() as tg:

        async def rerun() -> None:
            await _flaky_runner(Hangs(set()), store).run(
                "b", trials_per_task=3, k_values=(1, 3), rerun=("error",)
            )

        tg.start_soon(rerun)
        await started.wait()
        tg.cancel_scope.cancel()
    async with store.opened():
        shown = await rebuild_report(store, "b", (1, 3))
    assert [t.status for t in shown.tasks["t"].trials] == ["completed", "error", "completed"]
    assert shown.pass_at_k == first.pass_at_k
    agent.asked.clear()
    again = await _flaky_runner(agent, store).run(
        "b", trials_per_task=3, k_values=(1, 3), run_cost_limit=1.0
    )
    assert again.stopped is not None and agent.asked == []  # nothing ran
    assert [t.status for t in again.tasks["t"].trials] == ["completed", "error", "completed"]
    assert again.pass_at_k == first.pass_at_k


@pytest.mark.parametrize("backend", ["memory", "sqlite", "postgres"])
async def test_a_rescore_after_a_cancelled_rerun_scores_the_attempt_its_report_counts(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    """A rerun of a max_iterations trial, cancelled mid-attempt, leaves the trial counted
    with its earlier attempt; a rescore with a fixed scorer reported that attempt with
    the old scorer's verdict (pass@1 0.0 where the new scorer says 1.0). It scores that
    attempt now, and the rerun, resumed, still runs and scores the new one."""
    import anyio

    from corral.cli._inspect import rebuild_report
    from corral.history import evaluation_of

    store: corral.CommitStore = MemoryStore()
    if backend != "memory":
        where = tmp_path / "s.db" if backend == "sqlite" else request.getfixturevalue("pg_dsn")
        store = corral.open_store(str(where))
    fixed: list[bool] = []
    started = anyio.Event()

    class Agent:
        hangs = False

        async def act(self, session: AgentSession) -> corral.Action:
            if self.hangs:
                started.set()
                await anyio.sleep_forever()
            return corral.Action("step")

    def make(agent: Agent) -> corral.CorralRunner:
        env = FakeEnvironment(evaluate=lambda r: Evaluation(float(bool(fixed)), bool(fixed)))
        tasks = {"t": Meta("a", "e", max_iterations=1)}
        return corral.CorralRunner(
            tasks, {"a": agent}, {"e": env}, store=store, retry_policy=NO_BACKOFF
        )

    first = await make(Agent()).run("b", trials_per_task=1)
    assert [t.status for t in first.tasks["t"].trials] == ["max_iterations"]
    hangs = Agent()
    hangs.hangs = True
    async with anyio.create_task_group() as tg:

        async def rerun() -> None:
            await make(hangs).run("b", trials_per_task=1, rerun=("max_iterations",))

        tg.start_soon(rerun)
        await started.wait()
        tg.cancel_scope.cancel()
    fixed.append(True)
    rescored = await make(Agent()).rescore("b")
    assert rescored.finished == 1
    assert rescored.pass_at_k[1] == 1.0
    key = corral.TrialKey("b", "t", 0)
    async with store.opened():
        assert (await rebuild_report(store, "b")).pass_at_k[1] == 1.0  # its head too
        history = await store.history(key)
    kinds = [c.kind for c in history]
    assert kinds.count("reopen") == 1 and kinds[-1] == "evaluation"
    first_end = kinds.index("terminal")
    assert evaluation_of(history[-1]).terminal_seq == first_end
    # The rerun goes on where it stopped: its new attempt runs, ends and is scored.
    resumed = await make(Agent()).run("b", trials_per_task=1)
    assert resumed.finished == 1 and resumed.pass_at_k[1] == 1.0
    async with store.opened():
        history = await store.history(key)
    kinds = [c.kind for c in history]
    assert kinds.count("terminal") == 2 and kinds[-2:] == ["terminal", "evaluation"]
    assert evaluation_of(history[-1]).terminal_seq is None
    (trial,) = resumed.tasks["t"].trials
    assert trial.status == "max_iterations" and trial.evaluation is not None


async def test_a_child_left_unreachable_by_a_stopped_rerun_runs_once_its_parent_completed() -> None:
    """A rerun writes a trial's reopen marker only as the trial starts: a run stopped
    after a parent's rerun completed and before its unreachable child could start
    leaves the child's record standing; the next run, rerun or not, runs the child."""
    store = MemoryStore()
    broken = {True}
    asked: list[str] = []

    class Agent:
        async def act(self, session: AgentSession) -> Final:
            asked.append(session.task_id)
            if session.task_id == "p" and broken:
                raise RuntimeError("broken parent")
            session.record_usage(cost=1.0)
            return Final(session.task_id)

    tasks = {"p": Meta("a", "e"), "c": Meta("a", "e", dependencies=("p",))}

    def make() -> corral.CorralRunner:
        env = FakeEnvironment(evaluate=lambda r: Evaluation(1.0, True))
        return corral.CorralRunner(
            tasks, {"a": Agent()}, {"e": env}, store=store, retry_policy=NO_BACKOFF
        )

    first = await make().run("b", k_values=(1,))
    assert first.counts["unreachable"] == 1 and first.counts["error"] == 1
    broken.clear()
    asked.clear()
    stopped = await make().run("b", k_values=(1,), rerun=("error",), run_cost_limit=1.0)
    assert asked == ["p"] and stopped.stopped is not None
    assert stopped.counts["unreachable"] == 1  # the child's record stands, counted
    asked.clear()
    last = await make().run("b", k_values=(1,))
    assert asked == ["c"]
    assert last.counts["completed"] == 2 and last.pass_at_k[1] == 1.0


RETRY_ONCE = corral.RetryPolicy(max_retries=1, backoff_base=0)


async def test_a_rerun_trial_gets_its_own_retries_not_the_earlier_attempts() -> None:
    """A trial rerun after ``error`` gets a fresh attempt with its retries: the earlier
    attempt's failed tries (since the reopen marker) are not the new attempt's."""
    store = MemoryStore()
    fails = {"left": 2}
    calls: list[int] = []

    class Agent:
        async def act(self, session: AgentSession) -> Final:
            calls.append(session.attempt)
            if fails["left"]:
                fails["left"] -= 1
                raise RuntimeError("flaky")
            return Final("ok")

    def make() -> corral.CorralRunner:
        return corral.CorralRunner(
            {"t": Meta("a", "e")},
            {"a": Agent()},
            {"e": FakeEnvironment()},
            store=store,
            retry_policy=RETRY_ONCE,
        )

    first = await make().run("b", k_values=(1,))
    assert first.counts["error"] == 1 and len(calls) == 2  # a try and its one retry
    fails["left"] = 1  # the rerun's first try fails, its retry succeeds
    calls.clear()
    again = await make().run("b", k_values=(1,), rerun=("error",))
    assert len(calls) == 2, calls
    assert again.counts["completed"] == 1


async def _old_style_markers(store: corral.CommitStore, keys: list[tuple[str, int]]) -> None:
    """What the code before db4a0cd left when a rerun crashed right after `_reopen`:
    every reopened trial's marker, written up front."""
    import time

    from corral import history
    from corral._types import Commit
    from corral.store import TrialKey

    for task_id, trial in keys:
        key = TrialKey("b", task_id, trial)
        h = await store.history(key)
        status = history.terminal_of(h[-1]).status
        marker = Commit(
            h[-1].seq + 1, "reopen", history.encode(history.reopen(status)), time.time()
        )
        await store.enqueue(key, [marker]).wait()


async def test_an_old_store_with_up_front_markers_resumes_a_child_left_unreachable_again() -> None:
    """Resuming a store the earlier code left (parent and child reopened up front, then
    a crash): the parent fails again, the child ends unreachable after its marker."""
    store = MemoryStore()

    class Agent:
        async def act(self, session: AgentSession) -> Final:
            if session.task_id == "p":
                raise RuntimeError("broken parent")
            return Final("ok")

    tasks = {"p": Meta("a", "e"), "c": Meta("a", "e", dependencies=("p",))}

    def make() -> corral.CorralRunner:
        return _no_retries(tasks, Agent(), store)

    first = await make().run("b", k_values=(1,))
    assert first.counts["unreachable"] == 1 and first.counts["error"] == 1
    await _old_style_markers(store, [("p", 0), ("c", 0)])
    again = await make().run("b", k_values=(1,))
    assert again.counts["unreachable"] == 1 and again.counts["error"] == 1


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_observers_hear_every_commit_of_a_rerun_once_in_order(
    kind: str, tmp_path: Path
) -> None:
    """A rerun deferred by a rate limit, its child reopened behind it and a parent
    failing again: each commit written by the rerun is heard once, in sequence order
    (its reopen marker first), and the store holds no gap."""
    store: corral.CommitStore = (
        MemoryStore() if kind == "memory" else corral.SQLiteStore(tmp_path / "s.db")
    )
    state = {"broken": True, "limited": 0}

    class Agent:
        async def act(self, session: AgentSession) -> Final:
            if session.task_id in ("p", "q") and state["broken"]:
                raise RuntimeError("broken parent")
            if session.task_id == "p" and state["limited"]:
                state["limited"] -= 1
                raise corral.RateLimited(retry_after=0)
            return Final("ok")

    tasks = {
        "p": Meta("a", "e"),
        "q": Meta("a", "e"),
        "c": Meta("a", "e", dependencies=("p",)),
        "d": Meta("a", "e", dependencies=("q",)),
    }

    def make() -> corral.CorralRunner:
        return _no_retries(tasks, Agent(), store)

    await make().run("b", trials_per_task=2, k_values=(1,))
    before = {}
    from corral.store import TrialKey

    async with store.opened():
        for t in tasks:
            for r in range(2):
                before[(t, r)] = len(await store.history(TrialKey("b", t, r)))
    heard: dict[tuple[str, int], list[int]] = {}

    class Heard:
        def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
            heard.setdefault((key.task_id, key.trial), []).append(commit.seq)

    state["broken"], state["limited"] = False, 2
    # q stays broken: make it fail again via a separate flag
    tasks_q_broken = True

    class Agent2(Agent):
        async def act(self, session: AgentSession) -> Final:
            if session.task_id == "q" and tasks_q_broken:
                raise RuntimeError("still broken")
            return await super().act(session)

    runner = corral.CorralRunner(
        tasks,
        {"a": Agent2()},
        {"e": FakeEnvironment()},
        store=store,
        retry_policy=corral.RetryPolicy(max_retries=0, backoff_base=0),
    )
    await runner.run("b", trials_per_task=2, k_values=(1,), rerun=("error",), observers=[Heard()])
    async with store.opened():
        for t in tasks:
            for r in range(2):
                h = await store.history(TrialKey("b", t, r))
                assert [c.seq for c in h] == list(range(len(h)))
                assert heard.get((t, r), []) == list(range(before[(t, r)], len(h))), (t, r)
                assert [c.kind for c in h].count("reopen") == 1, (t, r, [c.kind for c in h])


def _no_retries(
    tasks: dict[str, Meta], agent: Any, store: corral.CommitStore
) -> corral.CorralRunner:
    return corral.CorralRunner(
        tasks, {"a": agent}, {"e": FakeEnvironment()}, store=store, retry_policy=NO_BACKOFF
    )


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_resumed_trial_sees_the_finished_previous_trial_not_its_unfinished_rerun(
    kind: str, tmp_path: Path
) -> None:
    """Trial 1 started seeing trial 0 (its evaluation, its final state), then stopped.
    A rerun reopened trial 0 and stopped mid-attempt. Resumed while trial 0's new
    attempt is still running, trial 1 must see what it saw before (spec 3.3: the
    choice is recorded with its setup, so a resumed trial sees the same; and it sees
    a trial whose evaluation had finished), not the unfinished attempt's setup state
    with no evaluation."""
    import anyio

    store: corral.CommitStore = (
        MemoryStore() if kind == "memory" else corral.SQLiteStore(tmp_path / "s.db")
    )
    run = {"n": 0}
    scope: dict[str, anyio.CancelScope] = {}
    seen: dict[int, tuple[Any, Any, Any]] = {}
    released = anyio.Event()

    class Agent:
        async def act(self, session: AgentSession) -> corral.Action:
            return corral.Action("go", {})

    class Env:
        async def setup(self, session: AgentSession) -> Any:
            return {"trial": session.trial, "run": run["n"], "fresh": True}

        async def execute(self, action: corral.Action, session: AgentSession) -> Any:
            if session.trial == 1:
                seen[run["n"]] = (
                    session.previous_trial,
                    session.previous_evaluation,
                    session.previous_state,
                )
                if run["n"] == 1:
                    scope["run"].cancel()
                    await anyio.sleep_forever()
                released.set()
            elif run["n"] == 2:  # trial 0's rerun stops mid-attempt
                scope["run"].cancel()
                await anyio.sleep_forever()
            elif run["n"] == 3:  # ... and is still running when trial 1 goes on
                await released.wait()
            return corral.ToolEffect("ok", {"trial": session.trial, "run": run["n"]})

        async def evaluate(self, trial: TrialRecord) -> Evaluation:
            return Evaluation(0.5, False, {"trial": trial.trial})

    tasks = {"t": Meta("a", "e", max_iterations=1)}

    async def go(**kw: Any) -> corral.BenchmarkReport | None:
        run["n"] += 1
        runner = corral.CorralRunner(
            tasks, {"a": Agent()}, {"e": Env()}, store=store, retry_policy=NO_BACKOFF
        )
        with anyio.CancelScope() as scope["run"]:
            return await runner.run("b", trials_per_task=2, k_values=(1,), **kw)
        return None

    assert await go(max_parallel_per_task=1) is None  # trial 1 stopped mid-attempt
    assert seen[1] == (
        0,
        Evaluation(0.5, False, {"trial": 0}),
        {"trial": 0, "run": 1},
    )
    assert await go(max_parallel_per_task=1, rerun=("max_iterations",)) is None
    report = await go(max_parallel_per_task=2, max_parallel=2)
    assert report is not None
    assert seen[3] == seen[1]
    assert [t.status for t in report.tasks["t"].trials] == ["max_iterations"] * 2


async def test_a_trial_sees_the_attempt_it_is_counted_with_past_an_unfinished_reopen() -> None:
    """Trial 0 finished and was scored, then two reruns reopened it and neither
    finished: trial 1 sees the finished attempt, its state with its evaluation, not
    the first rerun's unfinished setup state paired with that evaluation."""
    from corral.history import (
        EvaluationPayload,
        ReopenPayload,
        SetupPayload,
        encode,
        terminal,
    )
    from corral.runtime._trial import load_previous
    from corral.store import TrialKey

    def commit(seq: int, kind: str, payload: Any) -> corral.Commit:
        return corral.Commit(seq, kind, encode(payload), 100.0 + seq)

    ended = corral.TrialStatus.MAX_ITERATIONS
    commits = [
        commit(0, "setup", SetupPayload({"attempt": 1})),
        commit(1, "terminal", terminal(ended, attempts=1, state={"attempt": 1, "done": True})),
        commit(2, "evaluation", EvaluationPayload(0.5, False, {"attempt": 1})),
        commit(3, "reopen", ReopenPayload("rerun", "max_iterations")),
        commit(4, "setup", SetupPayload({"attempt": 2})),  # stopped mid-attempt
        commit(5, "reopen", ReopenPayload("rerun", "max_iterations")),
        commit(6, "setup", SetupPayload({"attempt": 3})),  # running yet
    ]
    store = MemoryStore()
    async with store.opened():
        await store.append(TrialKey("b", "t", 0), commits)
        previous = await load_previous(store, TrialKey("b", "t", 1), 0)
    assert previous is not None
    assert previous.evaluation == Evaluation(0.5, False, {"attempt": 1})
    assert previous.state == {"attempt": 1, "done": True}
