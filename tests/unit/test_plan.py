"""`build_plan`: selection, dependency closure, ordering and refusal of cycles."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from corral import BenchmarkTaskMetadata, ConfigError
from corral.scheduler import RunPlan, build_plan


def task(*parents: str, **inputs: object) -> BenchmarkTaskMetadata:
    return BenchmarkTaskMetadata("a", "e", dependencies=parents, inputs=inputs)


# root <- mid <- leaf, root <- side; lone stands apart.
TASKS = {
    "lone": task(),
    "root": task(),
    "mid": task("root"),
    "side": task("root"),
    "leaf": task("mid", "side"),
}


def plan(
    task_ids: Sequence[str] | None = None,
    *,
    include: bool = True,
    tasks: Mapping[str, BenchmarkTaskMetadata] = TASKS,
) -> RunPlan:
    return build_plan(tasks, task_ids, include_dependencies=include, trials_per_task=2)


def test_everything_in_mapping_order() -> None:
    p = plan()
    assert p.task_ids == ("lone", "root", "mid", "side", "leaf")
    assert p.metadata == tuple(TASKS.values())
    assert p.added == frozenset() and p.trials_per_task == 2


def test_parents_children_and_depth() -> None:
    p = plan()
    index = {t: i for i, t in enumerate(p.task_ids)}
    assert p.parents[index["leaf"]] == (index["mid"], index["side"])
    assert sorted(p.children[index["root"]]) == [index["mid"], index["side"]]
    depth = dict(zip(p.task_ids, p.depth, strict=True))
    # The longest chain below (and including) each task: the critical path goes first.
    assert depth == {"lone": 1, "root": 3, "mid": 2, "side": 2, "leaf": 1}


def test_selection_is_closed_over_ancestors() -> None:
    p = plan(["leaf"])
    assert p.task_ids == ("root", "mid", "side", "leaf")
    assert p.added == {"root", "mid", "side"}
    assert plan(["mid", "lone"]).task_ids == ("lone", "root", "mid")


def test_duplicates_in_the_selection_count_once() -> None:
    assert plan(["lone", "lone"]).task_ids == ("lone",)


def test_a_complete_selection_without_closure_is_accepted() -> None:
    p = plan(["root", "mid"], include=False)
    assert p.task_ids == ("root", "mid") and p.added == frozenset()


def test_missing_parent_without_closure_is_refused() -> None:
    with pytest.raises(ConfigError, match="'mid' depends on 'root'.*include_dependencies=False"):
        plan(["mid"], include=False)


@pytest.mark.parametrize(
    ("task_ids", "message"),
    [
        (["nope"], "unknown task id 'nope'"),
        ([], "task_ids is empty"),
        ("lone", "task_ids must be a sequence"),
    ],
)
def test_bad_selection_is_refused(task_ids: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        plan(task_ids)  # type: ignore[arg-type]


def test_unknown_dependency_is_refused() -> None:
    with pytest.raises(ConfigError, match="'x' depends on unknown task 'ghost'"):
        plan(tasks={"x": task("ghost")})


@pytest.mark.parametrize(
    ("tasks", "cycle"),
    [
        ({"a": task("a")}, "a -> a"),
        ({"a": task("b"), "b": task("a")}, "a -> b -> a"),
        ({"z": task(), "a": task("c"), "b": task("a"), "c": task("b", "z")}, "a -> c -> b -> a"),
    ],
    ids=["self", "two", "three"],
)
def test_cycles_are_refused_and_named(tasks: dict[str, BenchmarkTaskMetadata], cycle: str) -> None:
    with pytest.raises(ConfigError, match=f"dependency cycle: {cycle}"):
        plan(tasks=tasks)


def test_a_cycle_outside_the_selection_is_still_refused() -> None:
    tasks = {"ok": task(), "a": task("b"), "b": task("a")}
    with pytest.raises(ConfigError, match="dependency cycle"):
        plan(["ok"], tasks=tasks)


def test_config_is_what_a_resumed_run_must_match() -> None:
    config = plan(["mid"]).config()
    assert config["trials_per_task"] == 2
    assert list(config["tasks"]) == ["root", "mid"]
    assert config["tasks"]["mid"] == {
        "agent_id": "a",
        "environment_id": "e",
        "model": None,
        "max_iterations": 10,
        "dependencies": ["root"],
        "inputs": {},
    }
