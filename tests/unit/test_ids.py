"""Ids (benchmark, task, dependency): a bad one is a `ConfigError` naming what it is and
the value, from the runner and from a task file alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import corral
from corral import BenchmarkTaskMetadata, ConfigError
from corral._ids import check_id
from corral.testing import FakeEnvironment, ScriptedAgent

from .test_values import LONE, M, line, write


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "non-empty"),
        ("   ", "non-empty"),
        (None, "non-empty string, not None"),
        (7, "non-empty string, not 7"),
        ("a\x00b", "control character '\\x00'"),
        ("a\nb", "control character '\\n'"),
        ("tab\t", "control character '\\t'"),
        ("a\u2028b", "control character '\\u2028'"),
        ("rtl\u202eevil", "control character '\\u202e'"),
        (f"a{LONE}", "lone surrogate"),
        ("x" * 201, "201 characters"),
    ],
)
def test_a_bad_id_is_refused_naming_what_and_the_value(value: Any, problem: str) -> None:
    with pytest.raises(ConfigError, match="^benchmark id ") as info:
        check_id("benchmark id", value)
    assert problem in str(info.value)
    if isinstance(value, str):
        assert repr(value)[:20] in str(info.value)
    assert len(str(info.value)) < 200  # a long value is shown truncated


@pytest.mark.parametrize("value", ["t", "x" * 200, " padded ", "tâche/ü", "👩\u200d💻", "a-b_c.d"])
def test_good_ids_pass(value: str) -> None:
    assert check_id("task id", value) == value


@pytest.mark.parametrize(
    ("tasks", "named"),
    [
        ({"a\nb": M("a", "e")}, "task id 'a\\nb'"),
        ({"x" * 201: M("a", "e")}, "task id 'xxxx"),
        ({"t": M("a", "e", dependencies=("p\x00",))}, "dependency of task 't'"),
    ],
)
def test_bad_task_and_dependency_ids_are_refused_by_the_runner(
    tasks: dict[str, BenchmarkTaskMetadata], named: str
) -> None:
    with pytest.raises(ConfigError) as info:
        corral.CorralRunner(tasks, {"a": ScriptedAgent()}, {"e": FakeEnvironment()})
    assert named in str(info.value)


@pytest.mark.parametrize(
    ("row", "named"),
    [
        (line("a\u0007b"), "control character"),
        (line("x" * 201), "201 characters"),
        (line("t", dependencies=["ok", "\x1b"]), "dependency of task 't'"),
    ],
)
def test_bad_ids_in_a_task_line_name_file_and_line(
    tmp_path: Path, row: dict[str, Any], named: str
) -> None:
    path = write(tmp_path / "t.jsonl", line("ok"), row)
    with pytest.raises(ConfigError) as info:
        corral.TaskSource.jsonl(path)
    assert f"{path}:2" in str(info.value) and named in str(info.value)
