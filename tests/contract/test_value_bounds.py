"""Numbers no store can hold are refused when recorded, failing only their attempt."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import corral
from corral import BenchmarkTaskMetadata, Final, NotSerializableError, TrialStatus, Usage
from corral._json import MAX_DEPTH, MAX_INT_DIGITS, check_json, dumps, loads
from corral.testing import FakeEnvironment, ScriptedAgent

M = BenchmarkTaskMetadata
INT64_MAX = 2**63 - 1


@pytest.fixture(params=["sqlite", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        yield tmp_path / "store.db"
    elif request.param == "memory":
        yield corral.MemoryStore()
    else:
        yield request.getfixturevalue("pg_dsn")


def usage_agent(usage: dict[str, dict[str, Any]]) -> ScriptedAgent:
    """Records ``usage[task_id]`` (if any) with its answer, an integer past int64."""

    def decide(session: corral.AgentSession) -> Final:
        if session.task_id in usage:
            session.record_usage(**usage[session.task_id])
        return Final(10**30)  # inside a payload: stored as JSON text, read back exactly

    return ScriptedAgent(decide)


@pytest.mark.anyio
async def test_a_number_past_what_a_store_holds_fails_only_its_trial_and_every_rerun_runs(
    store: Any,
) -> None:
    bad = {
        "tokens": {"input_tokens": 10**30},
        "output": {"output_tokens": INT64_MAX + 1},
        "cost": {"cost": 1e308},
    }
    tasks = {t: M("a", "e") for t in ("ok", *bad)}
    env = FakeEnvironment()
    for _ in range(2):  # the rerun resumes: nothing in the store makes it fail
        runner = corral.CorralRunner(tasks, {"a": usage_agent(bad)}, {"e": env}, store=store)
        report = await runner.run("b")
        ok = report.tasks["ok"].trials[0]
        assert ok.status == TrialStatus.COMPLETED and ok.output == 10**30
        for task_id, shown in (("tokens", 10**30), ("output", INT64_MAX + 1), ("cost", 1e308)):
            trial = report.tasks[task_id].trials[0]
            assert trial.status == TrialStatus.ERROR and trial.attempts == 1
            assert trial.error is not None and repr(shown) in trial.error
        json.dumps(report.to_dict(), allow_nan=False)


@pytest.mark.anyio
async def test_a_trial_whose_steps_add_up_past_int64_tokens_ends_and_the_store_goes_on(
    store: Any,
) -> None:
    """Each step is within bounds; their sum is not what a 64-bit head column holds.
    Before, the head's write failed its whole batch: the run died, its terminal rolled
    back, and every resume died the same way."""

    def decide(session: corral.AgentSession) -> Any:
        session.record_usage(input_tokens=2**62)
        return corral.Action("noop", {}) if session.iteration < 2 else Final("done")

    tasks = {"big": M("a", "e")}
    runner = corral.CorralRunner(
        tasks, {"a": ScriptedAgent(decide)}, {"e": FakeEnvironment()}, store=store
    )
    trial = (await runner.run("b")).tasks["big"].trials[0]
    assert trial.status == TrialStatus.COMPLETED
    assert trial.usage.input_tokens == 3 * 2**62  # the record: every step's exact count
    other = corral.CorralRunner(
        tasks, {"a": ScriptedAgent(lambda s: Final("ok"))}, {"e": FakeEnvironment()}, store=store
    )
    assert (await other.run("other")).counts["completed"] == 1


def test_the_usage_of_one_step_is_bounded_as_a_sum_too() -> None:
    session = corral.AgentSession(
        benchmark_id="b", task_id="t", trial=0, metadata=M("a", "e"), inputs={}
    )
    session.record_usage(input_tokens=INT64_MAX, cost=1e15)
    with pytest.raises(corral.ConfigError, match=f"input_tokens {INT64_MAX + 1}"):
        session.record_usage(input_tokens=1)
    with pytest.raises(corral.ConfigError, match="cost"):
        session.record_usage(cost=1e15)
    assert session.take_usage() == Usage(INT64_MAX, 0, 1e15)  # what was refused was not added


def test_an_integer_too_long_for_a_json_reader_is_refused_and_one_at_the_limit_round_trips() -> (
    None
):
    at_limit = 10**MAX_INT_DIGITS - 1
    assert loads(dumps(check_json({"n": [at_limit, -at_limit]}, "v"))) == {
        "n": [at_limit, -at_limit]
    }
    for past in (10**MAX_INT_DIGITS, -(10**MAX_INT_DIGITS), 7**20_000):
        with pytest.raises(NotSerializableError, match=r"v\['n'\] is an integer of about"):
            check_json({"n": past}, "v")


def test_a_report_over_an_overflowing_cost_sum_is_valid_json_with_null() -> None:
    # Written before costs were bounded: the sum of two is infinite; JSON has no Infinity.
    total = Usage(cost=1e308) + Usage(cost=1e308)
    assert json.loads(json.dumps(total.to_dict(), allow_nan=False))["cost"] is None


@pytest.mark.anyio
async def test_a_model_reply_counting_1e30_prompt_tokens_fails_only_its_attempt(
    tmp_path: Path,
) -> None:
    from corral.agents import ToolAgent
    from corral.models import OpenAICompatible
    from corral.testing import ChatReply, FakeChatServer

    def reply(body: dict[str, Any]) -> ChatReply:
        huge = "huge" in json.dumps(body["messages"])
        return ChatReply.text("done", usage=(10**30, 1) if huge else (3, 1))

    tasks = {t: M("a", "e", inputs={"p": t}) for t in ("fine", "huge")}
    with FakeChatServer(reply) as server:
        agent = ToolAgent(OpenAICompatible("m", base_url=server.url))
        for _ in range(2):
            runner = corral.CorralRunner(
                tasks,
                {"a": agent},
                {"e": FakeEnvironment()},
                store=tmp_path / "s.db",
                backoff_base=0.0,  # the huge reply's attempts are retried at once
            )
            report = await runner.run("b")
            assert report.tasks["fine"].trials[0].status == TrialStatus.COMPLETED
            huge = report.tasks["huge"].trials[0]
            assert huge.status == TrialStatus.ERROR and str(10**30) in (huge.error or "")
    assert report.usage.input_tokens == 3


def _nested(levels: int) -> Any:
    value: Any = 0
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.anyio
async def test_a_value_as_deep_as_allowed_is_recorded_in_every_commit_it_goes_into(
    tmp_path: Path,
) -> None:
    """A state nested as deep as a recorded value may be goes one level deeper inside
    its commit's payload: the runtime's own commits (a failed attempt's terminal), and a
    copy of the store, must not check it again as if the payload were the value."""

    def fail(session: corral.AgentSession) -> Any:
        raise RuntimeError("the agent fails")

    state = _nested(MAX_DEPTH)
    check_json(state, "state")  # allowed when recorded
    runner = corral.CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(fail)},
        {"e": FakeEnvironment(state=state)},
        store=tmp_path / "s.db",
        max_retries=0,
    )
    trial = (await runner.run("b")).tasks["t"].trials[0]
    assert trial.status == TrialStatus.ERROR and "the agent fails" in (trial.error or "")
    copied = await corral.store.copy_benchmarks(
        corral.SQLiteStore(tmp_path / "s.db"), corral.SQLiteStore(tmp_path / "d.db")
    )
    assert [c.benchmark_id for c in copied] == ["b"]
