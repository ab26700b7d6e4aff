"""Several models in one run: every task once per model, each model under its own limit."""

from __future__ import annotations

import anyio
import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral import Final
from corral.testing import ConcurrencyGauge, FakeEnvironment, ScriptedAgent

TASKS = {
    "prep": Meta("a", "e"),
    "solve": Meta("a", "e", dependencies=("prep",)),
    "other": Meta("a", "e"),
}


def runner(agent: ScriptedAgent, **kw: object) -> corral.CorralRunner:
    return corral.CorralRunner(
        TASKS, {"a": agent}, {"e": FakeEnvironment()}, store=corral.MemoryStore(), **kw
    )


@pytest.mark.anyio
async def test_each_model_runs_every_task_under_its_own_limit() -> None:
    gauge = ConcurrencyGauge({"small": 1, "big": 3})

    async def decide(session: corral.AgentSession) -> Final:
        with gauge.hold(session.model):
            await anyio.lowlevel.checkpoint()
        # "big" passes everything, "small" only its first trial.
        return Final(session.model == "big" or session.trial == 0)

    async def score(trial: corral.TrialRecord) -> corral.Evaluation:
        return corral.Evaluation(float(trial.output), bool(trial.output))

    agent = ScriptedAgent(decide)
    run = corral.CorralRunner(
        TASKS,
        {"a": agent},
        {"e": FakeEnvironment(evaluate=score)},
        store=corral.MemoryStore(),
    )
    report = await run.run(
        "b",
        trials_per_task=2,
        k_values=(1, 2),
        max_parallel=8,
        max_parallel_per_task=2,
        max_parallel_by_model={"small": 1, "big": 3},
        models=["small", "big"],
    )
    gauge.assert_ok()
    assert gauge.peak("big") >= 2
    assert set(report.tasks) == {f"{t}@{m}" for t in TASKS for m in ("small", "big")}
    assert report.tasks["solve@big"].model == "big"
    assert report.by_model["big"] == {1: 1.0, 2: 1.0}
    assert report.by_model["small"] == {1: 0.5, 2: 1.0}
    assert report.to_dict()["by_model"]["small"] == {"1": 0.5, "2": 1.0}


@pytest.mark.anyio
async def test_dependencies_stay_within_a_model() -> None:
    seen: dict[str, object] = {}

    def decide(session: corral.AgentSession) -> Final:
        seen[session.task_id] = dict(session.inputs)
        return Final(session.model)

    report = await runner(ScriptedAgent(decide)).run("b", task_ids=["solve"], models=["x", "y"])
    # The parent's output arrives under the parent's own task id, as on one model.
    assert seen["solve@x"] == {"prep": "x"} and seen["solve@y"] == {"prep": "y"}
    assert sorted(report.added_by_dependencies) == ["prep@x", "prep@y"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("models", "message"),
    [
        (["x", "nope"], "unknown model 'nope'"),
        (["x", "x"], "'x' is listed twice"),
        ([], "non-empty sequence"),
        ("x", "non-empty sequence"),
        (["x", ""], "model name must be a non-empty string"),
    ],
)
async def test_bad_model_lists_are_refused(models: object, message: str) -> None:
    store = corral.MemoryStore()
    run = corral.CorralRunner(
        TASKS, {"a": ScriptedAgent()}, {"e": FakeEnvironment()}, store=store, models=["x", "y"]
    )
    with pytest.raises(corral.ConfigError, match=message):
        await run.run("b", models=models)  # type: ignore[arg-type]
    assert await store.benchmarks() == []
