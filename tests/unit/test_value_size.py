"""No value is stored unbounded: one larger than ``max_value_bytes`` fails its attempt,
naming its size; an error's own text is cut with a marker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import corral
from corral import Action, BenchmarkTaskMetadata, ConfigError, Final, ToolEffect, TrialStatus
from corral import NotSerializableError as Unrecordable
from corral._json import DEFAULT_MAX_VALUE_BYTES, check_json, dumps
from corral.testing import FakeEnvironment, ScriptedAgent

from .test_cli import QUICKSTART, _refused

M = BenchmarkTaskMetadata
MB = 2**20


def test_a_value_at_the_limit_passes_and_one_byte_more_is_refused_naming_its_size() -> None:
    value = {"text": "é" * 100 + "\n" * 10}  # 2 bytes a character, 2 an escape
    size = len(dumps(value).encode())
    assert check_json(value, "v", limit=size) == value
    with pytest.raises(Unrecordable) as info:
        check_json(value, "v", limit=size - 1)
    assert f"v is {size:,} bytes of JSON, more than max_value_bytes={size - 1:,}" in str(info.value)
    assert DEFAULT_MAX_VALUE_BYTES == 4 * MB


@pytest.mark.parametrize(
    "value",
    [
        [10**18] * 5_000,  # 20 bytes a number
        [-1.2345678901234567e-308] * 4_000,  # 25 bytes a number
        "\x01" * 17_000,  # 6 bytes a character
        {f"k{i:07}": None for i in range(7_000)},  # 15 bytes an item
        [[[None]]] * 12_000,  # 9 bytes an item
    ],
)
def test_every_kind_of_value_past_the_limit_is_refused(value: Any) -> None:
    assert len(dumps(value).encode()) > 100_000
    with pytest.raises(Unrecordable, match="more than max_value_bytes"):
        check_json(value, "v", limit=100_000)


def big_tool(size: int) -> Any:
    def decide(session: corral.AgentSession) -> Any:
        if session.iteration == 0:
            return Action("fetch", {})
        return Final("done")

    def effect(action: Action, session: corral.AgentSession) -> ToolEffect:
        return ToolEffect("x" * size if session.task_id == "big" else "small")

    return ScriptedAgent(decide), FakeEnvironment(effect=effect)


@pytest.mark.anyio
async def test_a_5_mb_observation_fails_its_attempt_under_the_default_cap(tmp_path: Path) -> None:
    agent, env = big_tool(5 * MB)
    store = tmp_path / "s.db"
    tasks = {t: M("a", "e") for t in ("ok", "big")}
    runner = corral.CorralRunner(tasks, {"a": agent}, {"e": env}, store=store, backoff_base=0)
    report = await runner.run("b")
    assert report.tasks["ok"].trials[0].status == TrialStatus.COMPLETED
    big = report.tasks["big"].trials[0]  # retried like any exception (SPEC 1), in vain
    assert big.status == TrialStatus.ERROR and big.attempts == 3
    assert big.error == (
        "NotSerializableError: the observation of 'fetch' is 5,242,882 bytes of JSON, "
        f"more than max_value_bytes={4 * MB:,}"
    )
    assert store.stat().st_size < MB  # nothing of it was stored


@pytest.mark.anyio
async def test_max_value_bytes_is_a_run_option(tmp_path: Path) -> None:
    agent, env = big_tool(2000)
    runner = corral.CorralRunner(
        {"big": M("a", "e")}, {"a": agent}, {"e": env}, store=tmp_path / "s.db"
    )
    report = await runner.run("b", max_value_bytes=1000)
    assert "more than max_value_bytes=1,000" in (report.tasks["big"].trials[0].error or "")
    report = await runner.run("c", max_value_bytes=3000)
    assert report.tasks["big"].trials[0].status == TrialStatus.COMPLETED


@pytest.mark.anyio
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "4MB"])
async def test_a_bad_max_value_bytes_is_refused_before_anything_is_written(
    tmp_path: Path, bad: Any
) -> None:
    store = corral.MemoryStore()
    runner = corral.CorralRunner(
        {"t": M("a", "e")}, {"a": ScriptedAgent()}, {"e": FakeEnvironment()}, store=store
    )
    with pytest.raises(
        ConfigError, match=f"max_value_bytes must be a positive integer, not {bad!r}"
    ):
        await runner.run("b", max_value_bytes=bad)
    assert await store.benchmarks() == []


def test_the_cli_takes_max_value_bytes(tmp_path: Path) -> None:
    line = _refused("run", QUICKSTART, "--store", tmp_path / "s.db", "--max-value-bytes", "0")
    assert "max_value_bytes must be a positive integer, not 0" in line


@pytest.mark.anyio
async def test_an_error_with_a_huge_message_is_recorded_cut_with_a_marker() -> None:
    def decide(session: corral.AgentSession) -> Any:
        raise RuntimeError("y" * (5 * MB))

    runner = corral.CorralRunner(
        {"t": M("a", "e")},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=corral.MemoryStore(),
        max_retries=0,
    )
    report = await runner.run("b")
    error = report.tasks["t"].trials[0].error
    assert error is not None and error.startswith("RuntimeError: yyy")
    assert len(error) < 20_000 and error.endswith(f"... [{5 * MB - 9_986:,} more characters]")
