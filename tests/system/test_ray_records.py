"""What a Ray host records is what a run in process records: values over the run's
``max_value_bytes`` fail the same way, and a trial deferred by a rate limit keeps the
errors of its earlier failed attempts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import corral
from corral import Action, BenchmarkTaskMetadata, Evaluation, Final, ToolEffect, TrialKey

from ..support.ray_support import comparable

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.usefixtures("ray_cluster"),
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),
]

BIG = 2_000  # bytes of JSON over the small cap below, far under the default


class FetchAgent:
    """One tool call, then ``Final`` with its observation's length."""

    async def act(self, session: corral.AgentSession) -> Action | Final:
        if session.iteration == 0:
            return Action("fetch", {})
        return Final(len(session.steps[0].effect.observation))


class SizedEnvironment:
    """Task "big" observes ``BIG`` characters; task "big_eval" is scored with as many."""

    async def setup(self, session: corral.AgentSession) -> None:
        return None

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        return ToolEffect("x" * BIG if session.task_id == "big" else "small")

    async def evaluate(self, trial: corral.TrialRecord) -> Evaluation:
        details = {"log": "y" * BIG} if trial.task_id == "big_eval" else {}
        return Evaluation(1.0, True, details)


async def test_max_value_bytes_holds_on_hosts_as_in_process(tmp_path: Path) -> None:
    task_set = {t: BenchmarkTaskMetadata("a", "e") for t in ("big", "big_eval", "small")}

    async def run(name: str, **options: Any) -> corral.BenchmarkReport:
        runner = corral.CorralRunner(
            task_set, {"a": FetchAgent()}, {"e": SizedEnvironment()}, store=tmp_path / name
        )
        return await runner.run("capped", **options)

    local = await run("local.db", max_value_bytes=1000)
    on_ray = await run("ray.db", max_value_bytes=1000, executor=corral.RayExecutor(hosts=1))
    assert comparable(on_ray) == comparable(local)
    [big], [big_eval] = on_ray.tasks["big"].trials, on_ray.tasks["big_eval"].trials
    assert big.status == "error" and "more than max_value_bytes=1,000" in (big.error or "")
    assert big_eval.evaluation is None
    assert "more than max_value_bytes=1,000" in (big_eval.error or "")
    # The default cap (4 MiB) passes them all.
    uncapped = await run("uncapped.db", executor=corral.RayExecutor(hosts=1))
    assert uncapped.counts["completed"] == 3 and uncapped.pass_at_k == {1: 1.0}


class FailThenLimitedAgent:
    """Its first attempt raises; its second hits a rate limit once (deferred), then ends."""

    async def act(self, session: corral.AgentSession) -> Final:
        if session.attempt == 0:
            raise ConnectionError("the first attempt went wrong")
        if not session.scratch.get("deferred"):  # scratch travels with a deferred trial
            session.scratch["deferred"] = True
            raise corral.RateLimited("slow down", retry_after=0.001)
        return Final("done")


async def test_a_deferred_trial_keeps_its_failed_attempts_on_hosts(tmp_path: Path) -> None:
    async def run(name: str, **options: Any) -> tuple[corral.BenchmarkReport, Any]:
        path = tmp_path / name
        runner = corral.CorralRunner(
            {"t": BenchmarkTaskMetadata("a", "e")},
            {"a": FailThenLimitedAgent()},
            {"e": SizedEnvironment()},
            store=path,
            retry_policy=corral.RetryPolicy(max_retries=2, backoff_base=0),
        )
        report = await runner.run("deferred", **options)
        store = corral.SQLiteStore(path, read_only=True)
        async with store.opened():
            history = await store.history(TrialKey("deferred", "t", 0))
        [terminal] = [c.payload for c in history if c.kind == "terminal"]
        failed = [(f["attempt"], f["error"]) for f in terminal.get("failed_attempts", [])]
        return report, failed

    local, local_failed = await run("local.db")
    on_ray, ray_failed = await run("ray.db", executor=corral.RayExecutor(hosts=1))
    assert local_failed == [(1, "ConnectionError: the first attempt went wrong")]
    assert ray_failed == local_failed
    assert comparable(on_ray) == comparable(local)
    assert on_ray.retries == local.retries == {"completed": 1}


class EchoAgent:
    async def act(self, session: corral.AgentSession) -> Final:
        return Final(session.inputs["answer"])


async def test_a_scorer_on_a_host_sees_the_task_as_written_and_its_target(
    tmp_path: Path,
) -> None:
    from corral import scorers

    tasks = {
        "q": BenchmarkTaskMetadata("a", "e", inputs={"answer": "42"}, target="42"),
        "r": BenchmarkTaskMetadata("a", "e", inputs={"answer": "41"}, target="42"),
    }
    environment = SizedEnvironment()
    environment.evaluate = scorers.combine(  # type: ignore[method-assign]
        scorers.exact(), scorers.scorer(lambda t: t.task_id == "q" and t.model == "m2", name="as")
    )
    runner = corral.CorralRunner(
        tasks, {"a": EchoAgent()}, {"e": environment}, store=tmp_path / "s.db"
    )
    report = await runner.run("facts", models=["m1", "m2"], executor=corral.RayExecutor(hosts=1))
    scores = {t: r.trials[0].evaluation.scores for t, r in report.tasks.items()}  # type: ignore[union-attr]
    assert scores == {
        "q@m1": {"exact": 1.0, "as": 0.0},
        "q@m2": {"exact": 1.0, "as": 1.0},
        "r@m1": {"exact": 0.0, "as": 0.0},
        "r@m2": {"exact": 0.0, "as": 0.0},
    }
