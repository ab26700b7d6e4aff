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
