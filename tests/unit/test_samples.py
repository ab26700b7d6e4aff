"""Samples: a task's target and metadata reach its scorer (with the task id as
written, the model, the environment and the inputs) and never its agent; the
README's own benchmark runs across several models; and they are part of the
stored configuration."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral import ConfigError, Evaluation, TaskSource, TrialRecord
from corral.agents import ToolAgent
from corral.cli import main
from corral.models import OpenAICompatible
from corral.runtime import _session
from corral.testing import ChatReply, FakeChatServer, FakeEnvironment, ScriptedAgent

pytestmark = pytest.mark.anyio


def answers_4() -> ScriptedAgent:
    return ScriptedAgent(lambda _: corral.Final(4))


README = Path(__file__).resolve().parents[2] / "README.md"


def readme_benchmark() -> str:
    """The README's ``mybench.py``, exactly as written there."""
    text = README.read_text(encoding="utf-8")
    match = re.search(r"```python\n(# mybench\.py\n.*?)```", text, re.S)
    assert match is not None
    return match.group(1)


def test_the_readme_benchmark_runs_unchanged_on_two_models(tmp_path: Path) -> None:
    # Before: the scorer saw "add@gpt-x" and raised KeyError, 16 failed evaluations.
    bench = tmp_path / "mybench.py"
    bench.write_text(readme_benchmark(), encoding="utf-8")
    args = ["run", str(bench), "--store", str(tmp_path / "s.db"), "--no-progress"]
    args += ["--model", "gpt-x,claude-y", "--json"]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    assert report["evaluation_errors"] == []
    assert report["pass_at_k"]["1"] == 1.0


class Recorder:
    """An environment whose ``evaluate`` keeps every record it is given."""

    name = "rec"

    def __init__(self) -> None:
        self.seen: list[TrialRecord] = []

    async def setup(self, session: corral.AgentSession) -> Any:
        return None

    async def execute(self, action: corral.Action, session: corral.AgentSession) -> Any:
        return corral.ToolEffect(None)

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        self.seen.append(trial)
        return Evaluation(1.0, trial.output == trial.target)


async def test_the_scorer_sees_the_task_as_written_with_its_target_and_metadata() -> None:
    env = Recorder()
    tasks = {
        "sum": Meta("a", "rec", inputs={"question": "2+2"}, target=4, metadata={"level": "easy"})
    }
    runner = corral.CorralRunner(
        tasks,
        {"a": answers_4()},
        {"rec": env},
        store=corral.MemoryStore(),
    )
    report = await runner.run("b", trials_per_task=1, models=["m1", "m2"])
    assert report.pass_at_k[1] == 1.0
    seen = sorted(env.seen, key=lambda r: str(r.model))
    assert [(r.task_id, r.task, r.model) for r in seen] == [
        ("sum", "sum", "m1"),
        ("sum", "sum", "m2"),
    ]
    first = seen[0]
    assert first.environment == "rec" and first.inputs == {"question": "2+2"}
    assert first.target == 4 and first.metadata == {"level": "easy"}
    # The internal key keeps "@model"; the report's records keep no inputs or target.
    assert set(report.tasks) == {"sum@m1", "sum@m2"}
    assert report.tasks["sum@m1"].trials[0].task_id == "sum@m1"


async def test_tool_agent_never_sends_target_or_metadata() -> None:
    with FakeChatServer([ChatReply(content="4")] * 2) as server:
        model = OpenAICompatible("m", base_url=server.url)
        tasks = {
            "q": Meta(
                "tool",
                "rec",
                inputs={"prompt": "What is 2+2?"},
                target="SECRET-TARGET-4",
                metadata={"hint": "SECRET-METADATA"},
            )
        }
        env = Recorder()
        runner = corral.CorralRunner(
            tasks, {"tool": ToolAgent(model)}, {"rec": env}, store=corral.MemoryStore()
        )
        await runner.run("b", trials_per_task=2)
        bodies = json.dumps(server.requests)
    assert server.calls == 2
    assert "What is 2+2?" in bodies
    assert "SECRET" not in bodies
    assert env.seen[0].target == "SECRET-TARGET-4"


async def test_an_agent_session_has_no_target_or_metadata() -> None:
    seen: list[Meta] = []

    class Peek:
        async def act(self, session: corral.AgentSession) -> corral.Final:
            seen.append(session.metadata)
            return corral.Final(1)

    tasks = {"q": Meta("p", "e", target=1, metadata={"k": "v"})}
    runner = corral.CorralRunner(
        tasks, {"p": Peek()}, {"e": FakeEnvironment()}, store=corral.MemoryStore()
    )
    await runner.run("b", trials_per_task=1)
    assert seen and seen[0].target is None and seen[0].metadata == {}


async def test_a_session_copies_its_metadata_only_when_the_agent_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The copy without the scorer's part is made on the first read, once a session:
    a session is made every trial, and most agents never read it."""
    copies: list[Meta] = []
    replace = dataclasses.replace

    def counted(value: Any, **changes: Any) -> Any:
        if isinstance(value, Meta) and changes == {"target": None, "metadata": {}}:
            copies.append(value)  # a session's (a run makes copies of its own too)
        return replace(value, **changes)

    monkeypatch.setattr(_session.dataclasses, "replace", counted)

    class Reads:
        def __init__(self, reads: int) -> None:
            self.reads = reads

        async def act(self, session: corral.AgentSession) -> corral.Final:
            for _ in range(self.reads):
                assert session.metadata.target is None
            return corral.Final(1)

    tasks = {"q": Meta("p", "e", target=1, metadata={"k": "v"})}
    for reads, made in ((0, 0), (2, 3)):
        runner = corral.CorralRunner(
            tasks, {"p": Reads(reads)}, {"e": FakeEnvironment()}, store=corral.MemoryStore()
        )
        await runner.run("b", trials_per_task=3)
        assert len(copies) == made, reads  # one a trial that reads it
        copies.clear()


def test_task_file_lines_take_target_and_metadata(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    line = {"id": "t", "agent_id": "a", "environment_id": "e", "target": [1, 2]}
    path.write_text(json.dumps({**line, "metadata": {"src": "x"}}) + "\n")
    source = TaskSource(path)
    assert source["t"].target == [1, 2] and source["t"].metadata == {"src": "x"}
    # Round trip through a spool keeps them.
    again = TaskSource.from_iterable([("t", source["t"])])
    assert again["t"].target == [1, 2] and again["t"].metadata == {"src": "x"}


@pytest.mark.parametrize(
    ("meta", "message"),
    [
        (Meta("a", "e", metadata=[1]), r"task 't' metadata must be a mapping"),  # type: ignore[arg-type]
        (Meta("a", "e", target={1, 2}), r"task 't' target"),
        (Meta("a", "e", metadata={"x": float("nan")}), r"task 't' metadata"),
    ],
)
def test_bad_targets_and_metadata_are_refused(meta: Meta, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        corral.CorralRunner({"t": meta}, {"a": ScriptedAgent()}, {"e": FakeEnvironment()})


async def test_a_changed_target_is_a_changed_configuration() -> None:
    store = corral.MemoryStore()

    def runner(target: object, metadata: dict[str, Any]) -> corral.CorralRunner:
        tasks = {"t": Meta("a", "e", target=target, metadata=metadata)}
        return corral.CorralRunner(
            tasks, {"a": ScriptedAgent()}, {"e": FakeEnvironment()}, store=store
        )

    await runner(1, {}).run("b", trials_per_task=1)
    await runner(1, {}).run("b", trials_per_task=1)  # the same: resumes
    with pytest.raises(ConfigError, match=r"task 't' target was 1, now 2"):
        await runner(2, {}).run("b", trials_per_task=1)
    with pytest.raises(ConfigError, match=r"task 't' metadata"):
        await runner(1, {"k": 1}).run("b", trials_per_task=1)


async def test_a_configuration_stored_before_targets_still_resumes() -> None:
    # A task without target or metadata stores none: the configuration is the same
    # as one stored before they existed.
    from corral.scheduler._plan import metadata_dict

    assert set(metadata_dict(Meta("a", "e"))) == {
        "agent_id",
        "environment_id",
        "model",
        "max_iterations",
        "dependencies",
        "inputs",
    }


async def test_rescore_gives_the_scorer_the_same_facts() -> None:
    store = corral.MemoryStore()
    env = Recorder()
    tasks = {"sum": Meta("a", "rec", inputs={"q": 1}, target=4, metadata={"m": 1})}
    runner = corral.CorralRunner(tasks, {"a": answers_4()}, {"rec": env}, store=store)
    await runner.run("b", trials_per_task=1, models=["m1"])
    env.seen.clear()
    await runner.rescore("b")
    (record,) = env.seen
    assert (record.task_id, record.task, record.model, record.target) == ("sum", "sum", "m1", 4)
    assert record.inputs == {"q": 1} and record.metadata == {"m": 1}


def test_a_ray_hosts_evaluation_job_carries_the_facts() -> None:
    from corral._records import scoring_facts
    from corral.executor._wire import dumps, loads
    from corral.runtime._jobs import EvalJob

    meta = Meta("a", "e", model="m", inputs={"q": 1}, target=[1, 2], metadata={"k": "v"})
    job = EvalJob(0, 1, "sum@m", "e", None, 3, facts=scoring_facts("sum", meta))
    again = loads(dumps([job]))[0]
    assert again.facts == ("sum", meta)
