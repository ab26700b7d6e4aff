"""``corral show ID TASK TRIAL --transcript``: a ToolAgent trial's model calls as a
chat in the terminal, and as JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli import main

from ..support.transcript_run import ANSWER, FAILURE, PROMPT, SAID, SYSTEM, THOUGHT, transcript_run


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("transcript") / "store.db"
    transcript_run(path)
    return str(path)


def _show(store: str, *more: str) -> str:
    args = ["show", "chat", "task", "0", "--store", store, "--transcript", *more]
    result = CliRunner(env={"COLUMNS": "400", "NO_COLOR": "1"}).invoke(main, args)
    assert result.exit_code == 0, result.output
    return result.output


def test_the_transcript_reads_as_a_chat(store: str) -> None:
    out = _show(store)
    out = out[out.index("call 1 ·") :]  # after the trial's header (its inputs among it)
    for text in (SYSTEM, PROMPT, SAID, THOUGHT, FAILURE, ANSWER):
        assert text in out
    assert out.index(SYSTEM) < out.index(PROMPT) < out.index(SAID) < out.index(ANSWER)
    assert "rate limited (429) · HTTP 429 · told to wait 0.01 s" in out
    assert "server error (5xx) · HTTP 502" in out
    assert out.count("tool echo") == 2  # both parallel calls' results, named
    assert out.count("→ echo(") == 2
    assert "call 1 · seq 1 · chat-model" in out and "120+30 tok" in out


def test_the_transcript_as_json(store: str) -> None:
    calls = json.loads(_show(store, "--json"))
    assert [c["seq"] for c in calls] == [1, 6]
    assert [m["role"] for m in calls[1]["sent"]] == ["tool", "tool"]
    assert calls[0]["call"]["reasoning"] == THOUGHT
    assert [f["kind"] for f in calls[0]["call"]["failed"]] == ["429"]


def test_a_trial_without_model_calls_says_so(tmp_path: Path) -> None:
    from ..support.viewer_stores import real_runs

    path = tmp_path / "plain.db"
    real_runs(path)
    args = ["show", "base", "task-0", "0", "--store", str(path), "--transcript"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0 and "no model calls recorded" in result.output


def test_a_rerun_starts_a_fresh_transcript_marked_where_it_begins(tmp_path: Path) -> None:
    import anyio

    import corral
    from corral import BenchmarkTaskMetadata as Meta
    from corral.testing import ChatReply, FakeChatServer
    from corral.view._transcript import transcript_data

    from ..support.tool_bench import Ledger, agent, ledger_model, tasks

    path = tmp_path / "store.db"
    replies = iter([ChatReply.failure(400, "refused the first time")])
    with FakeChatServer(lambda body: next(replies, None) or ledger_model(body)) as server:

        async def run(**options: object) -> None:
            task: dict[str, Meta] = tasks(1)
            runner = corral.CorralRunner(
                task,
                {"teller": agent(server.url)},
                {"ledger": Ledger()},
                store=corral.SQLiteStore(path),
            )
            await runner.run("again", **options)

        anyio.run(run)
        anyio.run(lambda: run(rerun=("error",)))
    args = ["show", "again", "acct-1", "0", "--store", str(path), "--transcript"]
    result = CliRunner(env={"COLUMNS": "400", "NO_COLOR": "1"}).invoke(main, args)
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.index("attempt 1") < out.index("refused the first time") < out.index("attempt 2 (")
    assert "attempt 2 (rerun at " in out and "after an attempt that ended error" in out
    after = out[out.index("attempt 2 (") :]
    assert after.count("call 1 ·") == 1 and "call 3 ·" in after  # numbered afresh
    entries = json.loads(CliRunner().invoke(main, [*args, "--json"]).output)
    assert [e["kind"] for e in entries] == ["call", "attempt", "call", "call", "call"]
    assert (entries[1]["attempt"], entries[1]["reason"]) == (2, "rerun")

    async def page() -> list[dict[str, object]]:
        store = corral.SQLiteStore(path)
        async with store.opened():
            return transcript_data(await store.history(corral.TrialKey("again", "acct-1", 0)))

    data = anyio.run(page)
    assert [(e["kind"], e["attempt"]) for e in data] == [
        ("call", 1),
        ("attempt", 2),
        ("call", 2),
        ("call", 2),
        ("call", 2),
    ]
    assert data[1]["previous_status"] == "error"


def test_a_rescore_of_the_earlier_attempt_mid_rerun_shows_whose_scorer_calls_they_are(
    tmp_path: Path,
) -> None:
    """A rescore while a rerun was unfinished scored the earlier attempt: its scorer
    calls land after the new attempt's reopen marker, and were shown under the new
    attempt's heading as if scoring it (which has not ended)."""
    import anyio

    import corral

    def said(seq: int, model: str, text: str) -> dict[str, object]:
        return {"model": model, "keep": 0, "messages": [{"role": "user", "content": text}],
                "text": f"reply {seq}"}  # fmt: skip

    def scored(seq: int, text: str, **more: object) -> corral.Commit:
        payload = {"score": 1.0, "passed": True, "details": {}, **more}
        return corral.Commit(
            seq, "evaluation", {**payload, "model_calls": [said(seq, "judge", text)]}, seq
        )

    end = {"status": "max_iterations", "output": None, "attempts": 1, "state": None}
    commits = [
        corral.Commit(0, "setup", {"state": None, "previous_trial": None}, 0.0),
        corral.Commit(1, "model_call", said(1, "m", "first try"), 1.0),
        corral.Commit(2, "terminal", end, 2.0),
        scored(3, "grade with the old scorer"),
        corral.Commit(4, "reopen", {"reason": "rerun", "previous_status": "max_iterations"}, 4.0),
        corral.Commit(5, "setup", {"state": None, "previous_trial": None}, 5.0),
        scored(6, "grade with the fixed scorer", terminal_seq=2),
        corral.Commit(7, "model_call", said(7, "m", "second try"), 7.0),
    ]
    path = tmp_path / "store.db"
    config = {"trials_per_task": 1, "tasks": {"t": {"agent_id": "a", "environment_id": "e"}}}

    async def write() -> None:
        store = corral.SQLiteStore(path)
        async with store.opened():
            await store.register_benchmark("b", config)
            await store.append(corral.TrialKey("b", "t", 0), commits)

    anyio.run(write)
    args = ["show", "b", "t", "0", "--store", str(path), "--transcript"]
    result = CliRunner(env={"COLUMNS": "400", "NO_COLOR": "1"}).invoke(main, args)
    assert result.exit_code == 0, result.output
    out = result.output
    heading = next(line for line in out.splitlines() if "seq 6" in line)
    assert "scorer call 2 of attempt 1 · seq 6" in heading, out
    after = out[out.index("attempt 2 (") :]
    assert "scorer call 1 · seq 3" not in after and "call 1 · seq 7" in after


def test_each_calls_heading_shows_its_cache_tokens_as_the_viewers_does(tmp_path: Path) -> None:
    """An Anthropic call's prompt-cache reads and writes were left out of its heading
    (the viewer's transcript and --json show them)."""
    import dataclasses

    import anyio

    import corral
    from corral.testing import ChatReply, FakeAnthropicServer

    from ..support.tool_bench import Ledger, agent, ledger_model, tasks

    path = tmp_path / "store.db"
    cached = dataclasses.replace(ChatReply.tools(("lookup", {"account": 1})), cache=(1500, 300))
    replies = iter([cached])
    with FakeAnthropicServer(lambda body: next(replies, None) or ledger_model(body)) as server:
        runner = corral.CorralRunner(
            tasks(1),
            {"teller": agent(server.url, "anthropic")},
            {"ledger": Ledger()},
            store=corral.SQLiteStore(path),
        )
        anyio.run(lambda: runner.run("cached"))
    args = ["show", "cached", "acct-1", "0", "--store", str(path), "--transcript"]
    result = CliRunner(env={"COLUMNS": "400", "NO_COLOR": "1"}).invoke(main, args)
    assert result.exit_code == 0, result.output
    heading = next(line for line in result.output.splitlines() if "call 1 ·" in line)
    assert "cache 1,500 read / 300 written" in heading, heading
    later = next(line for line in result.output.splitlines() if "call 2 ·" in line)
    assert "cache" not in later


def test_a_replys_text_stands_between_its_tool_calls_as_written(tmp_path: Path) -> None:
    # The reply's text was shown whole before its tool calls ("First A.Then B.Both
    # asked." -> echo -> echo): what it wrote between and after them read as before.
    from ..support.transcript_run import AFTER, BEFORE, BETWEEN, interleaved_run

    path = tmp_path / "mixed.db"
    interleaved_run(path)
    args = ["show", "mixed", "task", "0", "--store", str(path), "--transcript"]
    result = CliRunner(env={"COLUMNS": "400", "NO_COLOR": "1"}).invoke(main, args)
    assert result.exit_code == 0, result.output
    out = result.output[result.output.index("call 1 ·") : result.output.index("call 2 ·")]
    first, second = out.index("→ echo("), out.rindex("→ echo(")
    assert out.index(BEFORE) < first < out.index(BETWEEN) < second < out.index(AFTER)
