"""Run metadata: tags and a note given to a run, Corral's version and the benchmark
file's git commit are recorded with the run, on every backend, and shown by ``corral
report``, ``corral list`` (which filters by tag) and the JSON report."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

import corral
from corral import ConfigError, MemoryStore
from corral.cli import main
from corral.cli._inspect import rebuild_report
from corral.store import open_store

from ..contract.test_run_records import runner
from .test_cli import _bench


@pytest.mark.anyio
async def test_tags_and_note_are_recorded_with_the_run_and_read_back() -> None:
    store = MemoryStore()
    report = await runner(store).run("b", trials_per_task=2, tags=["nightly", "gpt-x"], note="n 1")
    assert (report.tags, report.note) == (("nightly", "gpt-x"), "n 1")
    assert report.provenance == {"corral_version": corral.__version__}
    async with store.opened():
        (run,) = await store.runs("b")
        again = await rebuild_report(store, "b")
    assert (run.tags, run.note) == (("nightly", "gpt-x"), "n 1")
    assert (again.tags, again.note, again.provenance) == (
        report.tags,
        report.note,
        report.provenance,
    )
    assert report.to_dict()["tags"] == ["nightly", "gpt-x"]


@pytest.mark.parametrize(
    ("tags", "note", "named"),
    [
        ("nightly", None, "'nightly'"),  # a string is not a list of tags
        (["ok", ""], None, "''"),
        (["ok", " padded"], None, "' padded'"),
        (["a\nb"], None, "'a\\\\nb'"),
        (["x" * 101], None, "101 characters"),
        ([3], None, "3"),
        ((), 7, "7"),
        ((), "y" * 10_001, "10,001 characters"),
    ],
)
@pytest.mark.anyio
async def test_a_bad_tag_or_note_is_refused_before_anything_is_written(
    tags: object, note: object, named: str
) -> None:
    store = MemoryStore()
    with pytest.raises(ConfigError, match=named):
        await runner(store).run("b", tags=tags, note=note)  # type: ignore[arg-type]
    async with store.opened():
        assert await store.benchmarks() == []


@pytest.mark.anyio
async def test_a_benchmark_file_in_git_records_its_commit(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(tmp_path), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q")
    bench = tmp_path / "bench.py"
    bench.write_text("# a benchmark\n")
    git("add", "bench.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = git("rev-parse", "HEAD")
    report = await runner(MemoryStore()).run("b", source=bench)
    assert report.provenance["git_commit"] == head
    assert report.provenance["benchmark_file"] == str(bench.resolve())
    bench.write_text("# changed\n")
    report = await runner(MemoryStore()).run("b", source=bench)
    assert report.provenance["git_commit"] == head + "+dirty"
    outside = await runner(MemoryStore()).run("b", source=Path("/") / "nowhere.py")
    assert "git_commit" not in outside.provenance


def test_the_cli_records_tags_and_list_filters_by_them(tmp_path: Path) -> None:
    store = str(tmp_path / "s.db")
    bench = _bench(tmp_path)
    cli = CliRunner()
    for bid, tags in (("one", ["--tag", "nightly", "--tag", "x"]), ("two", ["--tag", "x"])):
        done = cli.invoke(
            main,
            [
                "run",
                str(bench),
                "--store",
                store,
                "--benchmark-id",
                bid,
                "--progress",
                "none",
                *tags,
                "--note",
                f"note of {bid}",
            ],
        )
        assert done.exit_code in (0, 1), done.output
    shown = cli.invoke(main, ["report", "one", "--store", store, "--json"])
    data = json.loads(shown.output)
    assert (data["tags"], data["note"]) == (["nightly", "x"], "note of one")
    assert data["provenance"]["benchmark_file"] == str(bench.resolve())
    text = cli.invoke(main, ["report", "one", "--store", store]).output
    assert "#nightly #x · note of one" in text and f"corral {corral.__version__}" in text
    listed = cli.invoke(main, ["list", "--store", store, "--tag", "nightly"], terminal_width=200)
    assert "one" in listed.output and "two" not in listed.output
    listed = cli.invoke(main, ["list", "--store", store, "--tag", "x"], terminal_width=200)
    assert "one" in listed.output and "two" in listed.output
    none = cli.invoke(main, ["list", "--store", store, "--tag", "weekly"])
    assert "no benchmarks tagged 'weekly'" in none.output


@pytest.mark.anyio
async def test_a_store_written_before_run_metadata_reads_without_it(tmp_path: Path) -> None:

    from ..contract.test_run_records import V1_STORE

    shutil.copytree(V1_STORE, tmp_path / "v1")
    store = open_store(next((tmp_path / "v1").glob("*.db")), read_only=True)
    async with store.opened():
        for info in await store.benchmarks():
            report = await rebuild_report(store, info.benchmark_id)
            assert (report.tags, report.note, report.provenance) == ((), None, {})


@pytest.mark.anyio
async def test_a_tool_agent_s_generation_settings_are_recorded_with_the_run() -> None:
    from corral import BenchmarkTaskMetadata, CorralRunner, Final
    from corral.agents import ToolAgent
    from corral.testing import FakeEnvironment, ScriptedAgent

    class Model:  # a chat model as ToolAgent needs one; never called here
        model = "gpt-x"
        base_url = "http://127.0.0.1:9/v1"

        async def complete(self, *args: object, **kwargs: object) -> None:
            raise AssertionError("not called")

    agent = ToolAgent(Model(), "be brief", max_tokens=64, temperature=0.5, seed=3)  # type: ignore[arg-type]
    store = MemoryStore()
    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("plain", "e")},
        {"plain": ScriptedAgent(lambda s: Final(1)), "tool": agent},
        {"e": FakeEnvironment("e")},
        store=store,
    )
    report = await runner.run("b")
    settings = report.generation["tool"]
    assert (settings["model"], settings["client"], settings["temperature"]) == (
        "gpt-x",
        "Model",
        0.5,
    )
    assert (settings["max_tokens"], settings["seed"]) == (64, 3)
    assert len(settings["system_prompt_sha256"]) == 16 and "plain" not in report.generation
    async with store.opened():
        again = await rebuild_report(store, "b")
    assert again.generation == report.generation
    assert report.to_dict()["generation"]["tool"]["model"] == "gpt-x"


@pytest.mark.anyio
async def test_generation_settings_that_are_not_json_are_refused_before_the_run() -> None:
    from corral import BenchmarkTaskMetadata, CorralRunner, Final
    from corral.testing import FakeEnvironment, ScriptedAgent

    class Odd(ScriptedAgent):
        def generation_settings(self) -> dict[str, object]:
            return {"temperature": float("nan")}

    store = MemoryStore()
    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": Odd(lambda s: Final(1))},
        {"e": FakeEnvironment("e")},
        store=store,
    )
    with pytest.raises(ConfigError, match="agent 'a': generation_settings"):
        await runner.run("b")
    async with store.opened():
        assert await store.benchmarks() == []


@pytest.mark.anyio
async def test_an_agent_s_recorded_model_is_the_one_its_tasks_ran_on() -> None:
    """A task naming its model is run on it (ToolAgent asks with ``session.model``;
    `corral run --model` names it on every task): the run recorded the model the
    agent's client calls by default instead ("gpt-4o-mini" for a run on another)."""
    from corral import BenchmarkTaskMetadata, CorralRunner, Final
    from corral.testing import FakeEnvironment, ScriptedAgent

    class Agent(ScriptedAgent):
        def generation_settings(self) -> dict[str, object]:
            return {"model": "default-model", "temperature": 0.5}

    def runner(tasks: dict[str, BenchmarkTaskMetadata]) -> CorralRunner:
        agents = {"a": Agent(lambda s: Final(1)), "idle": Agent(lambda s: Final(1))}
        return CorralRunner(tasks, agents, {"e": FakeEnvironment("e")}, store=MemoryStore())

    named = {"t": BenchmarkTaskMetadata("a", "e", model="m1")}
    report = await runner(named).run("b")
    assert report.generation["a"] == {"model": "m1", "temperature": 0.5}
    assert report.generation["idle"]["model"] == "default-model"  # no task: its own
    mixed = {
        "t": BenchmarkTaskMetadata("a", "e", model="m2"),
        "u": BenchmarkTaskMetadata("a", "e"),
    }
    report = await runner(mixed).run("b")
    assert report.generation["a"]["model"] == "default-model, m2"
    report = await runner({"t": BenchmarkTaskMetadata("a", "e")}).run("b", models=["x", "y"])
    assert report.generation["a"]["model"] == "x, y"


@pytest.mark.anyio
async def test_an_agent_whose_own_model_is_unknown_records_the_one_its_tasks_named() -> None:
    """A client with no ``model`` of its own (a ToolAgent's custom client) still ran
    every task on the model the task named: that is recorded, not left out (shown as
    "?"); with a task on the agent's own, unknown model, nothing is made up."""
    from corral import BenchmarkTaskMetadata, CorralRunner, Final
    from corral.testing import FakeEnvironment, ScriptedAgent

    class Agent(ScriptedAgent):
        def generation_settings(self) -> dict[str, object]:
            return {"client": "Custom", "temperature": 0.5}

    def runner(tasks: dict[str, BenchmarkTaskMetadata]) -> CorralRunner:
        agents = {"a": Agent(lambda s: Final(1))}
        return CorralRunner(tasks, agents, {"e": FakeEnvironment("e")}, store=MemoryStore())

    named = {"t": BenchmarkTaskMetadata("a", "e", model="m1")}
    report = await runner(named).run("b")
    assert report.generation["a"] == {"client": "Custom", "temperature": 0.5, "model": "m1"}
    report = await runner({"t": BenchmarkTaskMetadata("a", "e")}).run("b", models=["x", "y"])
    assert report.generation["a"]["model"] == "x, y"
    mixed = {
        "t": BenchmarkTaskMetadata("a", "e", model="m2"),
        "u": BenchmarkTaskMetadata("a", "e"),
    }
    report = await runner(mixed).run("b")
    assert "model" not in report.generation["a"]
