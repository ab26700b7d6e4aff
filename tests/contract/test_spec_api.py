"""SPEC section 1, Public API: ``runner.run(benchmark_id, task_ids=None, ...)`` takes
the task ids as its second argument, as SPEC writes it (section 5's ``config``, a
`RunConfig`, may stand there too). Written with the public names only."""

from __future__ import annotations

import re
from typing import Any

import pytest

import corral
from corral import AgentSession, BenchmarkTaskMetadata, Evaluation, Final, TrialRecord

pytestmark = pytest.mark.anyio


class Answer:
    async def act(self, session: AgentSession) -> Any:
        return Final(session.task_id)


class Env:
    async def setup(self, session: AgentSession) -> Any:
        return None

    async def execute(self, action: Any, session: AgentSession) -> Any:
        raise AssertionError("no action is asked for")

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return Evaluation(1.0, True)


def runner() -> corral.CorralRunner:
    tasks = {t: BenchmarkTaskMetadata("a", "e") for t in ("x", "y", "z")}
    return corral.CorralRunner(tasks, {"a": Answer()}, {"e": Env()}, store=corral.MemoryStore())


async def test_task_ids_is_runs_second_positional_argument() -> None:
    report = await runner().run("b", ["x", "z"])
    assert list(report.tasks) == ["x", "z"]


async def test_task_ids_given_twice_is_a_config_error_naming_both() -> None:
    with pytest.raises(corral.ConfigError, match=r"\['x'\].*\['y'\]"):
        await runner().run("b", ["x"], task_ids=["y"])


async def test_a_run_config_still_stands_second() -> None:
    report = await runner().run("b", corral.RunConfig(task_ids=("y",)))
    assert list(report.tasks) == ["y"]


@pytest.mark.parametrize("second", ["x", {"trials_per_task": 2}, 3], ids=["str", "mapping", "int"])
async def test_a_second_argument_neither_task_ids_nor_a_run_config_is_named(second: Any) -> None:
    # SPEC's signature has task_ids there: the refusal says so, naming the value.
    named = r"task ids.*RunConfig, not " + re.escape(repr(second))
    with pytest.raises(corral.ConfigError, match=named):
        await runner().run("b", second)
