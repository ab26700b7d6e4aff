"""The stored configuration written and compared as a stream: the same text, the same
verdicts and messages as the whole-dict comparison, and no dict of every task."""

from __future__ import annotations

import json
import random
import tracemalloc
from pathlib import Path
from typing import Any

import anyio
import pytest

from corral import BenchmarkTaskMetadata, ConfigError, SQLiteStore
from corral._json import dumps
from corral.history import ConfigStream, StoredConfigText
from corral.scheduler._plan import build_plan
from corral.store._config_diff import check_same_config, check_same_stream


def _entry(i: int, **changes: Any) -> dict[str, Any]:
    entry = {
        "agent_id": "a",
        "environment_id": "é",
        "model": None,
        "max_iterations": 10,
        "dependencies": [],
        "inputs": {"n": i, "text": "x" * (i % 50), "f": 1.5e10},
    }
    entry.update(changes)
    return entry


def _config(ids: list[str], trials: int = 2) -> dict[str, Any]:
    return {"trials_per_task": trials, "tasks": {t: _entry(int(t[1:])) for t in ids}}


def _stream(config: dict[str, Any]) -> ConfigStream:
    return ConfigStream(config["trials_per_task"], config["tasks"].items)


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_the_streamed_text_is_the_whole_text() -> None:
    config = _config([f"t{i}" for i in range(3000)])
    assert "".join(_stream(config).text()) == dumps(config)
    assert len(list(_stream(config).text())) > 3  # written in pieces


@pytest.mark.parametrize("size", [1, 2, 7, 64, 100_000])
def test_stored_text_reads_back_task_by_task(size: int) -> None:
    config = _config([f"t{i}" for i in range(300)])
    read = StoredConfigText(_pieces(dumps(config), size))
    assert dict(read.tasks()) == config["tasks"]
    assert read.header == {"trials_per_task": 2} and read.has_tasks
    # Any spacing and key order an earlier writer used.
    spaced = json.dumps({"tasks": config["tasks"], "trials_per_task": 2, "x": [1]}, indent=1)
    read = StoredConfigText(_pieces(spaced, size))
    assert dict(read.tasks()) == config["tasks"]
    assert read.header == {"trials_per_task": 2, "x": [1]}


@pytest.mark.parametrize(
    "text",
    [
        '{"trials_per_task":1,"tasks":{"a":{}}',
        '{"trials_per_task":1,"tasks":{"a":NaN}}',
        "[1]",
        '{"tasks":{"a":{}}} x',
        '{"tasks":{"a" {}}}',
        "",
    ],
)
def test_text_that_is_no_configuration_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        list(StoredConfigText(_pieces(text, 3)).tasks())


def _verdict(stored: dict[str, Any], new: dict[str, Any], streamed: bool) -> str:
    try:
        if streamed:
            read = StoredConfigText(_pieces(dumps(stored), 97))
            check_same_stream("b", read, _stream(new), lambda s=stored: s)
        else:
            check_same_config("b", stored, new)
    except ConfigError as exc:
        return str(exc)
    return "same"


def test_the_streamed_comparison_says_what_the_whole_one_says() -> None:
    rng = random.Random(7)
    for _ in range(300):
        ids = [f"t{i}" for i in range(rng.randint(1, 40))]
        stored = _config(ids)
        chosen = rng.sample(ids, rng.randint(1, len(ids)))
        if rng.random() < 0.5:
            chosen.sort(key=ids.index)  # a run of some tasks keeps their order
        new = _config(chosen)
        kind = rng.randrange(5)
        if kind == 1:
            new["trials_per_task"] = 3
        elif kind == 2:
            t = rng.choice(chosen)
            new["tasks"][t] = _entry(int(t[1:]), max_iterations=rng.choice([3, 10]))
        elif kind == 3:
            new["tasks"][f"t{rng.randint(0, 60)}"] = _entry(0)
        elif kind == 4:
            t = rng.choice(chosen)
            new["tasks"][t] = {**new["tasks"][t], "target": "42"}
        whole = _verdict(stored, new, streamed=False)
        assert _verdict(stored, new, streamed=True) == whole
        # The memory store compares with the configuration it holds.
        got = "same"
        try:
            check_same_stream("b", stored, _stream(new), lambda s=stored: s)
        except ConfigError as exc:
            got = str(exc)
        assert got == whole


def _plan(n: int) -> Any:
    tasks = {
        f"task-{i:06d}": BenchmarkTaskMetadata("a", "e", inputs={"n": i, "p": "x" * 40})
        for i in range(n)
    }
    return build_plan(tasks, None, include_dependencies=True, trials_per_task=1)


@pytest.mark.slow  # 20,000 tasks registered in three stores, their memory traced
def test_registering_holds_no_dict_of_every_task(tmp_path: Path) -> None:
    plan = _plan(20_000)
    size = len(dumps(plan.config()))  # 3.4 MB of text; the dict takes some 4x that

    async def register() -> list[int]:
        peaks = []
        store = SQLiteStore(tmp_path / "s.db")
        async with store.opened():
            for _ in range(2):  # stored, then compared with the stored one
                tracemalloc.start()
                await store.register_benchmark("b", plan.stored_config())
                peaks.append(tracemalloc.get_traced_memory()[1])
                tracemalloc.stop()
        return peaks

    for peak in anyio.run(register):
        assert peak < size / 8
