"""Streaming task sources: JSONL files, iterables and async iterables, read on demand."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral import ConfigError, Final
from corral.testing import FakeEnvironment, ScriptedAgent

from .test_values import line, write


def rows(n: int, prompt: int = 20) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "id": f"t{i}",
            "agent_id": "a",
            "environment_id": "e",
            "model": "m",
            "inputs": {"prompt": "x" * prompt, "n": i},
        }
        for i in range(n)
    ]
    out.append({"id": "child", "agent_id": "a", "environment_id": "e", "dependencies": ["t0"]})
    return out


def write_jsonl(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in items))
    return path


def runner(tasks: Any, store: Any) -> corral.CorralRunner:
    def decide(session: corral.AgentSession) -> Final:
        return Final({k: v for k, v in session.inputs.items() if k != "prompt"})

    return corral.CorralRunner(
        tasks, {"a": ScriptedAgent(decide)}, {"e": FakeEnvironment()}, store=store
    )


def outputs(report: corral.BenchmarkReport) -> dict[tuple[str, int], Any]:
    return {(t, r.trial): r.output for t, task in report.tasks.items() for r in task.trials}


@pytest.mark.anyio
async def test_every_kind_of_source_runs_like_a_dict(tmp_path: Path) -> None:
    items = rows(6)
    as_dict = {r["id"]: Meta(**{k: v for k, v in r.items() if k != "id"}) for r in items}
    expected = outputs(await runner(as_dict, corral.MemoryStore()).run("b", trials_per_task=2))

    async def pages() -> AsyncIterator[dict[str, Any]]:
        for r in items:
            yield r

    sources = [
        corral.TaskSource.jsonl(write_jsonl(tmp_path / "tasks.jsonl", items)),
        corral.TaskSource.from_iterable(as_dict.items(), spool_dir=tmp_path),
        await corral.TaskSource.from_async_iterable(pages(), spool_dir=tmp_path),
    ]
    for source in sources:
        assert list(source) == list(as_dict) and source["t3"] == as_dict["t3"]
        report = await runner(source, corral.MemoryStore()).run("b", trials_per_task=2)
        assert outputs(report) == expected
        assert report.tasks["child"].trials[0].output == {"t0": {"n": 0}}


@pytest.mark.anyio
async def test_a_streamed_benchmark_resumes_and_refuses_an_edited_task(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "tasks.jsonl", rows(3))
    store = tmp_path / "store.db"
    first = await runner(corral.TaskSource.jsonl(path), store).run("b")
    again = await runner(corral.TaskSource.jsonl(path), store).run("b")
    assert again.resumed == 4 and outputs(again) == outputs(first)
    edited = rows(3)
    edited[1]["inputs"]["prompt"] = "changed"
    write_jsonl(path, edited)
    with pytest.raises(corral.ConfigError, match="task 't1' inputs"):
        await runner(corral.TaskSource.jsonl(path), store).run("b")


def test_a_mistyped_field_of_a_task_line_comes_with_its_close_match(tmp_path: Path) -> None:
    """An unknown field of a tasks file was refused without the field it meant."""
    path = tmp_path / "tasks.jsonl"
    line = {"id": "x", "agent_id": "a", "environment_id": "e", "dependancies": ["y"]}
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(corral.ConfigError) as info:
        corral.TaskSource.jsonl(path)
    assert str(info.value).endswith("unknown field 'dependancies'; did you mean 'dependencies'?")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not a JSON object"),
        ("[1, 2]", "expected a JSON object"),
        ('{"agent_id": "a", "environment_id": "e"}', "'id' must be a non-empty string"),
        ('{"id": "t0", "agent_id": "a", "environment_id": "e"}', "task id 't0' repeats"),
        ('{"id": "x", "agent_id": "a", "environment_id": "e", "prompt": 1}', "unknown field"),
        ('{"id": "x", "agent_id": 3, "environment_id": "e"}', "agent_id must be"),
        (
            '{"id": "x", "agent_id": "a", "environment_id": "e", "max_iterations": 0}',
            "max_iterations",
        ),
        (
            '{"id": "x", "agent_id": "a", "environment_id": "e", "dependencies": "t0"}',
            "dependencies",
        ),
    ],
)
def test_a_malformed_line_is_refused_with_file_and_line(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(rows(1)[0]) + "\n\n" + line + "\n")
    with pytest.raises(corral.ConfigError, match=message) as info:
        corral.TaskSource.jsonl(path)
    assert f"{path}:3" in str(info.value)  # the blank line counts


def test_bad_iterables_and_paths_are_refused(tmp_path: Path) -> None:
    with pytest.raises(corral.ConfigError, match="cannot be read"):
        corral.TaskSource.jsonl(tmp_path / "missing.jsonl")
    with pytest.raises(corral.ConfigError, match="expected BenchmarkTaskMetadata"):
        corral.TaskSource.from_iterable([("t", {"agent_id": "a"})], spool_dir=tmp_path)
    with pytest.raises(corral.ConfigError, match="spool_dir"):
        corral.TaskSource.from_iterable([], spool_dir=tmp_path / "nowhere")
    assert list(tmp_path.glob("corral-tasks-*")) == []  # a failed spool leaves no file


PLAN_IN_A_CHILD = """
import json, resource, sys
import corral
from corral.scheduler import Admission, Limits, build_plan
n, prompt, path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
with open(path, "w") as f:
    line = json.dumps({"agent_id": "a", "environment_id": "e", "inputs": {"prompt": "x" * prompt}})
    for i in range(n):
        f.write('{"id": "t%d", ' % i + line[1:] + "\\n")
source = corral.TaskSource.jsonl(path)
if sys.argv[4] == "dict":  # what a benchmark without a source holds
    source = {t: source[t] for t in source}
plan = build_plan(source, None, include_dependencies=True, trials_per_task=4)
admission = Admission(plan, Limits.resolve(max_parallel=64), ["e"] * n)
assert source["t%d" % (n - 1)].inputs["prompt"] == "x" * prompt  # read on demand
# VmHWM, not ru_maxrss: Linux carries the parent's peak RSS into a child's ru_maxrss
# across exec, so a large test process (one running Ray, say) would hide the child's.
hwm = [l for l in open("/proc/self/status") if l.startswith("VmHWM:")]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((int(hwm[0].split()[1]) if hwm else peak) * 1024)
"""


@pytest.mark.slow
def test_streamed_tasks_are_planned_without_holding_their_inputs(tmp_path: Path) -> None:
    """Peak RSS of indexing, planning and admitting 5,000 vs 50,000 tasks whose inputs are
    1,000 characters each: per extra task, a TaskSource needs a fraction of what a dict of
    the same tasks does, since it holds no inputs (45 MB of inputs between the two)."""
    import subprocess
    import sys

    def per_task(kind: str) -> float:
        peak = {}
        for n in (5_000, 50_000):
            path = tmp_path / f"{kind}-{n}.jsonl"
            out = subprocess.run(
                [sys.executable, "-c", PLAN_IN_A_CHILD, str(n), "1000", str(path), kind],
                capture_output=True,
                text=True,
                check=True,
            )
            peak[n] = int(out.stdout.strip())
        return (peak[50_000] - peak[5_000]) / 45_000

    streamed, held = per_task("source"), per_task("dict")
    assert held > 1000  # the inputs alone weigh 1,000 bytes a task
    assert streamed < held / 2, (streamed, held)


# -- a task file changed under a source ------------------------------------------


def three(path: Path, *, first: str = "p0") -> Path:
    return write(
        path,
        line("t0", inputs={"p": first}),
        line("t1", inputs={"p": "p1"}),
        line("t2", inputs={"p": "p2"}),
    )


@pytest.mark.parametrize("opened", [False, True], ids=["unopened", "opened"])
def test_a_task_line_rewritten_to_the_same_length_is_detected(tmp_path: Path, opened: bool) -> None:
    path = three(tmp_path / "t.jsonl")
    source = corral.TaskSource.jsonl(path)
    if opened:
        assert source["t0"].inputs == {"p": "p0"}  # the file handle is open from here on
    before = path.stat().st_size
    path.write_text(path.read_text().replace('"p1"', '"P1"'))
    assert path.stat().st_size == before
    with pytest.raises(ConfigError) as info:
        source["t1"]
    message = str(info.value)
    assert f"{path}:2" in message and "'t1'" in message and "changed" in message
    assert source["t2"].inputs == {"p": "p2"}  # an unchanged line still reads


def test_a_task_file_that_grew_or_shrank_is_detected(tmp_path: Path) -> None:
    path = three(tmp_path / "t.jsonl")
    source = corral.TaskSource.jsonl(path)
    three(path, first="a much longer first prompt")  # every later line moves
    with pytest.raises(ConfigError, match="changed") as info:
        source["t1"]
    assert f"{path}:2" in str(info.value)
    three(path, first="")
    with pytest.raises(ConfigError, match=f"{path}:3.*'t2'"):
        source["t2"]
    path.write_text("")  # truncated: the line is gone
    with pytest.raises(ConfigError, match="changed"):
        source["t1"]


def test_a_task_file_swapped_for_one_with_another_task_at_that_offset(tmp_path: Path) -> None:
    path = write(tmp_path / "t.jsonl", line("t0"), line("t1"))
    source = corral.TaskSource.jsonl(path)
    write(path, line("t1"), line("t0"))  # same lines, other order: same offsets, other ids
    with pytest.raises(ConfigError, match="'t0'.*changed|changed.*'t0'"):
        source["t0"]


@pytest.mark.anyio
async def test_a_task_file_changed_during_a_run_fails_only_that_trial(tmp_path: Path) -> None:
    path = three(tmp_path / "t.jsonl")
    source = corral.TaskSource.jsonl(path)

    def decide(session: Any) -> Final:
        if session.task_id == "t0":  # while t0 runs, somebody edits t1's line
            path.write_text(path.read_text().replace('"p1"', '"P1"'))
        return Final(session.inputs["p"])

    run = corral.CorralRunner(
        source,
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=tmp_path / "store.db",
    )
    report = await run.run("b", max_parallel=1)
    statuses = {t: r.trials[0].status for t, r in report.tasks.items()}
    assert statuses == {"t0": "completed", "t1": "error", "t2": "completed"}
    error = report.tasks["t1"].trials[0].error
    assert error is not None and "ConfigError" in error and "changed" in error
    assert report.tasks["t2"].trials[0].output == "p2"
