"""A graded-by-model scorer's calls are recorded with the evaluation commit (scorers
have no session) and shown in the trial's transcript as scorer calls: in
``corral show --transcript`` and the viewer's data; ``combine`` keeps them all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral import scorers
from corral.cli import main
from corral.cli._inspect import rebuild_report
from corral.history import EvaluationPayload, TranscriptCall, decode, transcript
from corral.models import ChatResponse, OpenAICompatible, ToolCall
from corral.testing import ChatReply, FakeChatServer, FakeEnvironment, ScriptedAgent
from corral.view._transcript import transcript_data

TEMPLATE = "Grade {output} against {target}."


def grader(body: dict[str, Any]) -> ChatReply:
    prompt = body["messages"][0]["content"]
    verdict = "C" if "Paris against Paris" in prompt else "I"
    return ChatReply(content=f"They match.\nGRADE: {verdict}", usage=(40, 8), reasoning="hmm")


def run(path: Path) -> None:
    with FakeChatServer(grader) as server:
        model = OpenAICompatible("judge", base_url=server.url, prices={"input": 1.0})
        judge = scorers.combine(
            scorers.model_graded(model, template=TEMPLATE),
            scorers.model_graded(model, template="Again: " + TEMPLATE, name="again"),
        )
        tasks = {"ok": Meta("a", "e", inputs={"say": "Paris"}, target="Paris")}
        runner = corral.CorralRunner(
            tasks,
            {"a": ScriptedAgent(lambda s: corral.Final(s.inputs["say"]))},
            {"e": FakeEnvironment(evaluate=judge)},
            store=corral.SQLiteStore(path),
        )
        anyio.run(runner.run, "graded")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("graded") / "store.db"
    run(path)
    return path


async def _history(path: Path) -> list[corral.Commit]:
    opened = corral.SQLiteStore(path)
    async with opened.opened():
        return await opened.history(corral.TrialKey("graded", "ok", 0))


def test_the_grader_calls_ride_on_the_evaluation_commit(store: Path) -> None:
    history = anyio.run(_history, store)
    assert [c.kind for c in history].count("model_call") == 0  # the agent asked no model
    evaluation = decode(next(c for c in history if c.kind == "evaluation"))
    assert isinstance(evaluation, EvaluationPayload) and evaluation.passed
    first, second = evaluation.model_calls
    assert first.messages == ({"role": "user", "content": "Grade Paris against Paris."},)
    assert second.messages[0]["content"].startswith("Again: ")
    assert (first.model, first.text, first.reasoning) == ("judge", "They match.\nGRADE: C", "hmm")
    assert (first.input_tokens, first.output_tokens, first.keep) == (40, 8, 0)
    assert first.latency is not None and first.endpoint is not None
    entries = transcript(history)
    calls = [(e.scorer, e.seq) for e in entries if isinstance(e, TranscriptCall)]
    assert len(entries) == 2 and calls == [(True, history[-1].seq)] * 2


def test_the_transcript_shows_them_as_scorer_calls(store: Path) -> None:
    args = ["show", "graded", "ok", "0", "--store", str(store), "--transcript"]
    result = CliRunner(env={"COLUMNS": "400", "NO_COLOR": "1"}).invoke(main, args)
    assert result.exit_code == 0, result.output
    out = result.output
    assert "scorer call 1 ·" in out and "scorer call 2 ·" in out
    assert "Grade Paris against Paris." in out and "GRADE: C" in out
    assert "no model calls recorded" not in out
    data = transcript_data(anyio.run(_history, store))
    assert [(e["kind"], e["scorer"]) for e in data] == [("call", True), ("call", True)]
    assert data[0]["messages"][0]["text"] == "Grade Paris against Paris."
    assert json.loads(CliRunner().invoke(main, [*args, "--json"]).output)[0]["scorer"] is True


@pytest.mark.anyio
async def test_an_evaluation_with_calls_not_made_by_ask_is_refused() -> None:
    bad = corral.Evaluation(1.0, True, model_calls=({"model": "m"},))
    runner = corral.CorralRunner(
        {"t": Meta("a", "e")},
        {"a": ScriptedAgent(lambda s: corral.Final("x"))},
        {"e": FakeEnvironment(evaluate=lambda trial: bad)},
        store=corral.MemoryStore(),
    )
    report = await runner.run("bad")
    failed = report.tasks["t"].trials[0].evaluation_error
    assert failed is not None and "Evaluation.model_calls must be a tuple" in failed


class UsesTools:
    """A judge that wrote text before its tool call and after it."""

    model = "judge"

    async def complete(self, messages: Any, **options: Any) -> ChatResponse:
        call = ToolCall("c1", "lookup", "{}")
        return ChatResponse("Checking.Done.", (call,), text_parts=("Checking.", "Done."))


@pytest.mark.anyio
async def test_a_scorer_calls_text_after_its_tool_call_is_recorded_where_it_wrote_it() -> None:
    """A scorer's call is recorded as a trial's is: its text split where its tool calls
    stand (`ChatResponse.text_parts`), so its transcript shows each call in its place."""
    _, record = await scorers.exact().ask(UsesTools(), [{"role": "user", "content": "grade"}])
    assert record.text == "Checking.Done."
    assert record.text_parts == ("Checking.", "Done.")


def test_the_report_counts_the_grader_calls_under_the_graders_model(store: Path) -> None:
    """The graders' calls were in the transcript and their tokens in the usage, but
    not in the report's model calls (read from the terminal, which scoring follows)."""

    async def both() -> tuple[corral.BenchmarkReport, Any]:
        opened = corral.SQLiteStore(store)
        async with opened.opened():
            report = await rebuild_report(opened, "graded")
            (record,) = report.tasks["ok"].trials
            return report, record.model_calls

    report, of_trial = anyio.run(both)
    assert report.model_calls["judge"].calls == 2  # from the trial heads
    assert of_trial["judge"].calls == 2  # and the trial's record, from its commits
    cli = CliRunner(env={"COLUMNS": "200", "NO_COLOR": "1"})
    shown = cli.invoke(main, ["report", "graded", "--store", str(store), "--json"])
    assert json.loads(shown.output)["model_calls"]["judge"]["calls"] == 2
