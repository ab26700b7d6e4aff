"""``session.inputs`` is the task's static input (SPEC 1): what one trial's agent
writes into it stays in that trial's session, never reaching the task's metadata,
its other trials or the benchmark's recorded configuration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import corral
from corral import AgentSession, BenchmarkTaskMetadata, Final
from corral.testing import FakeEnvironment, ScriptedAgent

pytestmark = pytest.mark.anyio


def runner_of(
    tmp_path: Path, inputs: dict[str, Any], decide: Callable[[AgentSession], Final]
) -> corral.CorralRunner:
    """One task given ``inputs``, its agent ``decide``, on an SQLite store."""
    return corral.CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e", inputs=inputs)},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=tmp_path / "store.db",
    )


async def test_an_agent_writing_into_its_inputs_changes_no_other_trial(tmp_path: Path) -> None:
    inputs: dict[str, Any] = {"prompt": "p", "notes": []}
    seen: list[Any] = []

    def decide(session: AgentSession) -> Final:
        seen.append((session.trial, list(session.inputs["notes"]), "mine" in session.inputs))
        session.inputs["mine"] = session.trial  # type: ignore[index]
        session.inputs["notes"].append(session.trial)
        return Final("done")

    runner = runner_of(tmp_path, inputs, decide)
    first = await runner.run("b", trials_per_task=3)
    assert seen == [(0, [], False), (1, [], False), (2, [], False)]
    assert inputs == {"prompt": "p", "notes": []}
    # The same benchmark again: its configuration is the one recorded, not refused.
    again = await runner.run("b", trials_per_task=3)
    assert again.to_dict()["tasks"] == first.to_dict()["tasks"]


async def test_an_agent_writing_into_empty_inputs_changes_no_other_trial(tmp_path: Path) -> None:
    inputs: dict[str, Any] = {}
    seen: list[Any] = []

    def decide(session: AgentSession) -> Final:
        seen.append((session.trial, dict(session.inputs)))
        session.inputs["mine"] = session.trial  # type: ignore[index]
        return Final("done")

    runner = runner_of(tmp_path, inputs, decide)
    await runner.run("b", trials_per_task=2)
    assert seen == [(0, {}), (1, {})]
    assert inputs == {}
