"""Budgets per trial (tokens, cost, working time) and the run-level cost limit.

Virtual time (trio's MockClock) makes working time exact: an agent that sleeps
10 s has worked 10 s, and a trial queued or backing off for an hour costs nothing.
"""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
from click.testing import CliRunner
from trio.testing import MockClock

import corral
from corral import (
    Action,
    AgentSession,
    ConfigError,
    Evaluation,
    Final,
    MemoryStore,
    RetryPolicy,
    TrialKey,
    TrialRecord,
    TrialStatus,
)
from corral import BenchmarkTaskMetadata as Meta
from corral.cli import main
from corral.progress import Tally
from corral.testing import FakeEnvironment, ScriptedAgent

pytestmark = pytest.mark.anyio

NO_BACKOFF = RetryPolicy(max_retries=0)
SRC = Path(__file__).resolve().parents[2] / "src"


@pytest.fixture
def anyio_backend() -> Any:
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


def always_passed(trial: TrialRecord) -> Evaluation:
    """A scorer that passes everything: a ``limit`` trial must still not count."""
    return Evaluation(1.0, True)


class Spender:
    """Each turn records ``tokens`` input tokens and ``cost``, works ``seconds`` (virtual
    time), and calls a tool, until ``turns`` turns are recorded; then ``Final``."""

    def __init__(
        self, *, tokens: int = 0, cost: float = 0.0, seconds: float = 0.0, turns: int = 3
    ) -> None:
        self.tokens, self.cost, self.seconds, self.turns = tokens, cost, seconds, turns
        self.calls = 0

    async def act(self, session: AgentSession) -> Action | Final:
        self.calls += 1
        if self.seconds:
            await anyio.sleep(self.seconds)
        session.record_usage(input_tokens=self.tokens, cost=self.cost)
        if session.iteration < self.turns:
            return Action("step", {"n": session.iteration})
        return Final("done")


def runner(
    agent: Any,
    *,
    tasks: dict[str, Meta] | None = None,
    store: corral.CommitStore | None = None,
    policy: RetryPolicy = NO_BACKOFF,
    env: FakeEnvironment | None = None,
) -> corral.CorralRunner:
    return corral.CorralRunner(
        tasks or {"t": Meta("a", "e")},
        {"a": agent},
        {"e": env or FakeEnvironment(evaluate=always_passed)},
        store=store or MemoryStore(),
        retry_policy=policy,
    )


async def terminal_payload(run: corral.CorralRunner, task: str = "t", trial: int = 0) -> Any:
    history = await run.store.history(TrialKey("b", task, trial))
    return next(c for c in reversed(history) if c.kind == "terminal").payload


async def test_token_limit_ends_the_trial_as_limit_before_its_tools_run() -> None:
    env = FakeEnvironment(evaluate=always_passed)
    run = runner(Spender(tokens=40, turns=5), env=env)
    report = await run.run("b", token_limit=100)
    [trial] = report.tasks["t"].trials
    assert (trial.status, trial.limit, trial.output) == (TrialStatus.LIMIT, "token_limit", None)
    # Scored (limit trials are evaluated), yet never a pass.
    assert trial.evaluation == Evaluation(1.0, True) and not trial.passed
    assert report.pass_at_k[1] == 0.0 and report.tasks["t"].passed == 0
    assert report.counts["limit"] == 1 and report.limited == {"token_limit": 1}
    assert trial.usage.input_tokens == 120
    assert "token_limit exceeded" in str(trial.error)
    payload = await terminal_payload(run)
    assert (payload["limit"], payload["spent"], payload["limit_value"]) == ("token_limit", 120, 100)
    assert payload["budget"] == {"token_limit": 100}
    # The third turn's model call overran: its action is recorded, its tool never ran.
    assert len(env.executions) == 2
    assert report.to_dict()["tasks"]["t"]["trials"][0]["limit"] == "token_limit"


async def test_cost_limit_and_a_final_answer_bought_over_budget() -> None:
    run = runner(Spender(cost=0.25, turns=2))
    report = await run.run("b", cost_limit=0.5)
    [trial] = report.tasks["t"].trials
    # Two turns cost 0.5 (not beyond the limit); the Final turn's 0.25 is.
    assert (trial.status, trial.limit, trial.output) == (TrialStatus.LIMIT, "cost_limit", None)
    assert trial.usage.cost == pytest.approx(0.75)
    payload = await terminal_payload(run)
    assert payload["spent"] == pytest.approx(0.75) and payload["limit_value"] == 0.5


async def test_a_trial_within_its_budget_completes_and_records_its_working_time() -> None:
    run = runner(Spender(tokens=10, cost=0.25, seconds=2, turns=2))
    # Spending exactly the token or cost limit is within it; working time is cut when
    # it reaches its limit, so 6 s of work needs more than 6.
    report = await run.run("b", token_limit=30, cost_limit=0.75, working_time_limit=6.5)
    [trial] = report.tasks["t"].trials
    assert (trial.status, trial.limit, trial.passed) == (TrialStatus.COMPLETED, None, True)
    assert trial.working_time == pytest.approx(6)
    assert report.working_seconds == pytest.approx(6)
    assert report.limited == {} and report.budgets["working_time_limit"] == 6.5


async def test_working_time_limit_cuts_a_running_agent_at_its_deadline() -> None:
    run = runner(Spender(seconds=10, turns=5))
    start = trio.current_time()
    report = await run.run("b", working_time_limit=25)
    [trial] = report.tasks["t"].trials
    assert (trial.status, trial.limit) == (TrialStatus.LIMIT, "working_time_limit")
    assert trio.current_time() - start == pytest.approx(25)  # cut mid-turn, not after it
    assert trial.working_time == pytest.approx(25)
    payload = await terminal_payload(run)
    assert payload["spent"] == pytest.approx(25) and payload["limit_value"] == 25


@pytest.mark.parametrize(
    ("trial_timeout", "working_time_limit", "ended"),
    [(15, 100, ("timeout", None)), (100, 15, ("limit", "working_time_limit"))],
)
async def test_whichever_of_trial_timeout_and_working_time_comes_first_ends_the_trial(
    trial_timeout: float, working_time_limit: float, ended: tuple[str, str | None]
) -> None:
    run = corral.CorralRunner(
        {"t": Meta("a", "e")},
        {"a": Spender(seconds=10, turns=9)},
        {"e": FakeEnvironment()},
        store=MemoryStore(),
        retry_policy=NO_BACKOFF,
        trial_timeout=trial_timeout,
    )
    start = trio.current_time()
    report = await run.run("b", working_time_limit=working_time_limit)
    [trial] = report.tasks["t"].trials
    assert (trial.status, trial.limit) == ended
    assert trio.current_time() - start == pytest.approx(15)


async def test_a_parent_that_ended_limit_leaves_its_child_unreachable() -> None:
    tasks = {"parent": Meta("a", "e"), "child": Meta("a", "e", dependencies=("parent",))}
    run = runner(Spender(tokens=40), tasks=tasks)
    report = await run.run("b", token_limit=100)
    assert report.tasks["parent"].trials[0].status == "limit"
    assert report.tasks["child"].trials[0].status == "unreachable"


async def test_working_time_excludes_waiting_for_a_slot() -> None:
    tasks = {"t0": Meta("a", "e"), "t1": Meta("a", "e")}
    run = runner(Spender(seconds=10, turns=2), tasks=tasks)
    start = trio.current_time()
    report = await run.run("b", max_parallel=1, working_time_limit=35)
    # One at a time: the second trial waited 30 s for the slot, and still had 35 s.
    assert trio.current_time() - start == pytest.approx(60)
    for task in report.tasks.values():
        [trial] = task.trials
        assert trial.status == TrialStatus.COMPLETED
        assert trial.working_time == pytest.approx(30)


async def test_working_time_excludes_retry_backoff_and_rate_limit_deferral() -> None:
    failures = {"raise": 1, "rate": 1}

    async def decide(session: AgentSession) -> Action | Final:
        await anyio.sleep(10)
        if session.iteration == 1 and failures["raise"]:
            failures["raise"] -= 1
            raise RuntimeError("flaky")  # retried after a backoff of up to 100 s
        if session.iteration == 2 and failures["rate"]:
            failures["rate"] -= 1
            raise corral.RateLimited("429", retry_after=500)
        return Action("step", {}) if session.iteration < 3 else Final("done")

    policy = RetryPolicy(max_retries=1, backoff_base=100, backoff_cap=100, rng=random.Random(3))
    backoff = RetryPolicy(backoff_base=100, backoff_cap=100, rng=random.Random(3)).delay(0)
    run = runner(ScriptedAgent(decide), policy=policy)
    start = trio.current_time()
    report = await run.run("b", working_time_limit=65)
    [trial] = report.tasks["t"].trials
    # Six calls of 10 s were worked (two of them raised, and their turns were asked
    # again), besides the backoff and the 500 s deferral, which are not work.
    assert trio.current_time() - start == pytest.approx(60 + backoff + 500)
    assert backoff > 5  # the backoff alone would otherwise have overrun the budget
    assert (trial.status, trial.attempts) == (TrialStatus.COMPLETED, 2)
    assert trial.working_time == pytest.approx(60)


class Stalls(Spender):
    """A `Spender` that stalls in its third turn, where its first run is cancelled."""

    async def act(self, session: AgentSession) -> Action | Final:
        if session.iteration == 2:
            await anyio.sleep_forever()
        return await super().act(session)


async def test_resume_keeps_the_spend_recorded_before_a_cancelled_run() -> None:
    store = MemoryStore()
    with anyio.move_on_after(100):
        await runner(Stalls(tokens=30, seconds=10, turns=9), store=store).run("b")
    history = await store.history(TrialKey("b", "t", 0))
    assert [c.kind for c in history].count("tool_effect") == 2
    assert history[-1].payload["worked"] == pytest.approx(20)

    # Resumed with budgets: 60 tokens and 20 s are already spent.
    agent = Spender(tokens=30, seconds=10, turns=9)
    run = runner(agent, store=store)
    start = trio.current_time()
    report = await run.run("b", token_limit=1000, working_time_limit=25)
    [trial] = report.tasks["t"].trials
    assert (trial.status, trial.limit) == (TrialStatus.LIMIT, "working_time_limit")
    assert trio.current_time() - start == pytest.approx(5)  # 20 s were worked before
    assert trial.working_time == pytest.approx(25)

    # Tokens alone, on a second store: the resumed trial goes on from the 60 tokens its
    # history holds, so one more turn of 30 overruns 80.
    store2 = MemoryStore()
    with anyio.move_on_after(100):
        await runner(Stalls(tokens=30, turns=9), store=store2).run("b")
    again = runner(Spender(tokens=30, turns=9), store=store2)
    report = await again.run("b", token_limit=80)
    [trial] = report.tasks["t"].trials
    assert (trial.status, trial.limit, trial.usage.input_tokens) == (
        TrialStatus.LIMIT,
        "token_limit",
        90,
    )


async def test_a_cut_just_short_of_a_whole_limit_records_the_limit_as_given() -> None:
    """A resumed trial's clock (2.2 s recorded, then from t=100) reaches its deadline
    at 4.999999999999997 s of a limit of 5: the cut records the limit itself, as the
    number it was given (``round`` of an int is that int: 5, not 5.0)."""
    store = MemoryStore()
    with anyio.move_on_after(100):
        await runner(Stalls(seconds=1.1, turns=9), store=store).run("b")
    run = runner(Spender(seconds=1.1, turns=9), store=store)
    report = await run.run("b", working_time_limit=5)
    assert report.tasks["t"].trials[0].limit == "working_time_limit"
    payload = await terminal_payload(run)
    assert (payload["spent"], payload["limit_value"]) == (5, 5)
    assert type(payload["spent"]) is int


async def test_a_tasks_own_budget_overrides_the_runs() -> None:
    tasks = {
        "tight": Meta("a", "e", token_limit=50),
        "loose": Meta("a", "e", token_limit=1000, cost_limit=5.0),
        "default": Meta("a", "e"),
    }
    run = runner(Spender(tokens=40, cost=1.0, turns=3), tasks=tasks)
    report = await run.run("b", token_limit=100, cost_limit=2.5)
    status = {t: (r.trials[0].status, r.trials[0].limit) for t, r in report.tasks.items()}
    assert status == {
        "tight": ("limit", "token_limit"),  # its own 50 < the run's 100
        "loose": ("completed", None),  # its own 1000 tokens and cost 5 > the run's
        "default": ("limit", "token_limit"),  # the run's 100
    }
    assert (await terminal_payload(run, "loose"))["budget"] == {
        "token_limit": 1000,
        "cost_limit": 5.0,
    }
    assert report.budgets == {"token_limit": 100, "cost_limit": 2.5}


async def test_rerun_limit_gives_a_fresh_budget() -> None:
    store = MemoryStore()
    first = await runner(Spender(tokens=40), store=store).run("b", token_limit=100)
    assert first.counts["limit"] == 1
    again = await runner(Spender(tokens=40), store=store).run(
        "b", token_limit=200, rerun=("limit",)
    )
    [trial] = again.tasks["t"].trials
    assert (trial.status, trial.passed) == (TrialStatus.COMPLETED, True)


async def test_run_cost_limit_stops_admission_and_a_higher_one_finishes() -> None:
    store = MemoryStore()
    tasks = {f"t{i}": Meta("a", "e") for i in range(4)}

    def make() -> corral.CorralRunner:
        return runner(Spender(cost=0.5, turns=1), tasks=tasks, store=store)

    report = await make().run("b", max_parallel=1, run_cost_limit=2)
    # Each trial costs 1: the second one reaches 2, and nothing starts after it.
    assert report.finished == 2 and not report.complete
    assert report.stopped is not None and report.stopped.startswith("run_cost_limit: 2 spent")
    assert report.to_dict()["stopped"] == report.stopped

    # The limit counts every run of the benchmark: the same one admits nothing more.
    same = await make().run("b", max_parallel=1, run_cost_limit=2)
    assert same.finished == 2 and same.stopped is not None

    higher = await make().run("b", max_parallel=1, run_cost_limit=10)
    assert higher.complete and higher.stopped is None
    assert higher.counts["completed"] == 4 and higher.usage.cost == pytest.approx(4)


async def test_a_cost_spent_to_the_limit_in_parts_is_not_over_it() -> None:
    # 0.1 three times is 0.30000000000000004 in floating point: the trial ended
    # "cost_limit exceeded: spent 0.3 of 0.3"; and 0.7 + 0.1 * 3 is 0.9999999999999999,
    # which never reached a run_cost_limit of 1, so a fifth trial started.
    report = await runner(Spender(cost=0.1, turns=2)).run("b", cost_limit=0.3)
    [trial] = report.tasks["t"].trials
    assert (trial.status, trial.error) == (TrialStatus.COMPLETED, None)

    class Spends:
        async def act(self, session: AgentSession) -> Final:
            session.record_usage(cost=0.7 if session.task_id == "t0" else 0.1)
            return Final("done")

    tasks = {f"t{i}": Meta("a", "e") for i in range(6)}
    ran = await runner(Spends(), tasks=tasks).run("c", max_parallel=1, run_cost_limit=1)
    assert ran.finished == 4 and ran.stopped is not None


async def test_run_cost_limit_counts_the_tasks_a_later_run_leaves_out() -> None:
    store = MemoryStore()
    tasks = {f"t{i}": Meta("a", "e") for i in range(3)}

    def make() -> corral.CorralRunner:
        return runner(Spender(cost=0.5, turns=1), tasks=tasks, store=store)

    first = await make().run("b", max_parallel=1, run_cost_limit=1)
    assert first.finished == 1 and first.stopped is not None  # t0 spent 1
    # Every run of the benchmark spent 1 already, t0's included though this run leaves
    # it out: nothing starts (before, t0's cost was not counted and t1 ran).
    later = await make().run("b", task_ids=["t1", "t2"], max_parallel=1, run_cost_limit=1)
    assert later.finished == 0 and later.stopped is not None
    assert later.stopped.startswith("run_cost_limit: 1 spent of 1")


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"token_limit": 0}, "token_limit must be a positive integer or None, not 0"),
        ({"token_limit": 1.5}, "not 1.5"),
        ({"token_limit": True}, "not True"),
        ({"cost_limit": -1}, "cost_limit must be a positive number or None, not -1"),
        ({"cost_limit": "1"}, "not '1'"),
        ({"working_time_limit": math.nan}, "working_time_limit must be a positive number"),
        ({"working_time_limit": 0}, "not 0"),
        ({"run_cost_limit": 0.0}, "run_cost_limit must be a positive number or None, not 0.0"),
        ({"run_cost_limit": math.inf}, "not inf"),
    ],
)
async def test_bad_budgets_are_refused_before_anything_runs(
    kwargs: dict[str, Any], named: str
) -> None:
    agent = Spender()
    run = runner(agent)
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(")", r"\)")):
        await run.run("b", **kwargs)
    assert agent.calls == 0
    async with run.store.opened():
        assert await run.store.benchmark_config("b") is None


@pytest.mark.parametrize(
    ("field", "value"),
    [("token_limit", -5), ("cost_limit", 0), ("working_time_limit", "60")],
)
def test_bad_task_budgets_are_refused_naming_the_task(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=f"task 'x' {field} must be a positive"):
        runner(Spender(), tasks={"x": Meta("a", "e", **{field: value})})


def test_a_task_file_line_may_set_budgets(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        '{"id": "a", "agent_id": "x", "environment_id": "e", "token_limit": 500, '
        '"working_time_limit": 30}\n'
        '{"id": "b", "agent_id": "x", "environment_id": "e", "cost_limit": -1}\n'
    )
    with pytest.raises(ConfigError, match=r"tasks.jsonl:2: task 'b' cost_limit"):
        corral.TaskSource(path)
    path.write_text(path.read_text().splitlines()[0] + "\n")
    meta = corral.TaskSource(path)["a"]
    assert (meta.token_limit, meta.cost_limit, meta.working_time_limit) == (500, None, 30)


def test_the_progress_tally_never_counts_a_limit_trial_as_passed() -> None:
    tally = Tally()
    key = TrialKey("b", "t", 0)
    tally.add(corral.Commit(0, "terminal", {"status": "limit", "limit": "cost_limit"}, 1.0), key)
    scored = {"score": 1.0, "passed": True, "details": {}, "trial_status": "limit"}
    tally.add(corral.Commit(1, "evaluation", scored, 2.0), key)
    assert tally.pass_counts == (0, 1) and tally.limits == {"cost_limit": 1}


BENCH = textwrap.dedent(
    """
    import corral

    class Agent:
        async def act(self, session):
            session.record_usage(input_tokens=40, output_tokens=2)
            if session.iteration < 4:
                return corral.Action("step", {})
            return corral.Final("done")

    class Env:
        async def setup(self, session):
            return None
        async def execute(self, action, session):
            return corral.ToolEffect("ok")
        async def evaluate(self, trial):
            return corral.Evaluation(1.0, True)

    benchmark = corral.Benchmark(
        {"t": corral.BenchmarkTaskMetadata("a", "e", cost_limit=3.0)},
        {"a": Agent()},
        {"e": Env()},
    )
    """
)


def test_cli_flags_set_budgets_and_show_prints_the_budget(tmp_path: Path) -> None:
    path = tmp_path / "bench.py"
    path.write_text(BENCH)
    store = tmp_path / "s.db"
    cli = CliRunner()
    bad = cli.invoke(main, ["run", str(path), "--store", str(store), "--token-limit", "0"])
    assert bad.exit_code == 2 and "token_limit must be a positive integer" in bad.output
    assert not store.exists()  # refused before the store was created

    args = ["run", str(path), "--store", str(store), "--token-limit", "100", "--no-progress"]
    ran = cli.invoke(main, [*args, "--run-cost-limit", "50"])
    assert ran.exit_code == 0, ran.output
    flat = " ".join(ran.output.split())
    assert "limit 1" in flat and "token_limit 100 per trial: ended 1" in flat
    assert "run_cost_limit 50" in flat

    shown = cli.invoke(main, ["show", "bench", "t", "0", "--store", str(store)])
    assert shown.exit_code == 0, shown.output
    flat = " ".join(shown.output.split())
    assert "token_limit 100: spent 126 tokens" in flat
    assert "cost_limit 3: spent cost 0" in flat
    assert "ended by token_limit" in flat


async def test_the_live_display_shows_spend_against_budgets() -> None:
    import io

    from rich.console import Console

    from corral.progress import ProgressDisplay

    display = ProgressDisplay(Console(file=io.StringIO(), force_terminal=True, width=160))
    tasks = {"t0": Meta("a", "e"), "t1": Meta("a", "e", cost_limit=0.3)}
    run = runner(Spender(tokens=40, cost=0.25, turns=3), tasks=tasks)
    await run.run("b", token_limit=100, run_cost_limit=50, observers=[display])
    console = Console(file=io.StringIO(), width=160)
    console.print(display.renderable())
    frame = " ".join(console.file.getvalue().split())  # type: ignore[attr-defined]
    assert "limit 2" in frame and "pass@1 so far 0.00 (0/2)" in frame
    assert "run cost 1.25 of 50" in frame  # 0.75 (t0, 3 turns) + 0.5 (t1, 2 turns)
    assert "token_limit 100 tokens per trial (ended 1)" in frame
    assert "cost_limit ended 1" in frame  # t1's own budget


CHILD = textwrap.dedent(
    """
    import sys, time
    import anyio, corral

    class Agent:
        async def act(self, session):
            if session.iteration == 2:
                print("stalled", flush=True)
                await anyio.sleep_forever()  # killed here
            time.sleep(0.1)  # work the clock sees
            session.record_usage(input_tokens=30)
            return corral.Action("step", {})

    class Env:
        async def setup(self, session):
            return None
        async def execute(self, action, session):
            return corral.ToolEffect("ok")
        async def evaluate(self, trial):
            return corral.Evaluation(1.0, True)

    runner = corral.CorralRunner(
        {"t": corral.BenchmarkTaskMetadata("a", "e")}, {"a": Agent()}, {"e": Env()},
        store=sys.argv[1],
    )
    anyio.run(runner.run, "b")
    """
)


@pytest.mark.slow  # starts a process: a system test
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_spend_survives_kill_9(tmp_path: Path) -> None:
    script, store = tmp_path / "child.py", tmp_path / "s.db"
    script.write_text(CHILD)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
    }

    def run_child_until_it_stalls() -> None:
        child = subprocess.Popen(
            [sys.executable, str(script), str(store)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert child.stdout is not None
        try:
            assert child.stdout.readline().strip() == "stalled"
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()

    await anyio.to_thread.run_sync(run_child_until_it_stalls)
    # Two turns (60 tokens, 0.2 s of work) were acknowledged before the kill: one more
    # turn of 30 overruns 80, however much of the killed process's last step landed.
    agent = Spender(tokens=30, turns=9)
    report = await runner(agent, store=corral.SQLiteStore(store)).run("b", token_limit=80)
    [trial] = report.tasks["t"].trials
    assert (trial.status, trial.limit, trial.usage.input_tokens) == ("limit", "token_limit", 90)
    assert agent.calls == 1
    assert trial.working_time is not None and trial.working_time >= 0.2


def test_the_live_display_shows_a_run_cost_summed_to_its_limit_as_reached() -> None:
    """0.7 + 0.1 + 0.1 + 0.1 is 0.9999999999999999 in floats: the run stops there (it
    reached run_cost_limit=1), and the display says so as the run does."""
    from corral.progress._tally import Tally
    from corral.progress._view import Snapshot, _budgets
    from corral.scheduler import Limits, Statistics

    spent = 0.7 + 0.1 + 0.1 + 0.1
    assert spent < 1
    snapshot = Snapshot(
        "b", 1.0, Statistics(0, 0, 0, 0, 0, 0), Limits(), Tally(), 0, None,
        budgets={"run_cost_limit": 1.0}, spent=spent,
    )  # fmt: skip
    assert str(_budgets(snapshot).style) == "bold yellow"
    below = Snapshot(
        "b", 1.0, Statistics(0, 0, 0, 0, 0, 0), Limits(), Tally(), 0, None,
        budgets={"run_cost_limit": 1.0}, spent=0.9,
    )  # fmt: skip
    assert str(_budgets(below).style) == ""
