"""The trial page's transcript in a real browser (Playwright on Debian's Chromium): a
ToolAgent trial with parallel tool calls, a rate-limited try, a 5xx and reasoning,
every recorded field of its model calls hostile, shown as text, served and exported."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench.viewer_stores import serving

from ..support.transcript_run import (
    ANSWER,
    ARGUMENT,
    FAILURE,
    LAST_THOUGHT,
    PROMPT,
    SAID,
    SYSTEM,
    THOUGHT,
    transcript_run,
)
from .test_viewer_browser import Watched, _export, _query, browser, off_loop, watched

__all__ = ["browser", "watched"]  # the fixtures, used by name


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("transcript-browser") / "store.db"
    off_loop(transcript_run, path)
    return path


def _check_transcript(watched: Watched, base: str, name: str) -> None:
    page = watched.page
    page.goto(base + "#/trial?" + _query(id="chat", task="task", trial="0"))
    page.locator("#transcript").wait_for()
    calls = page.locator("#transcript section.call")
    assert calls.count() == 2
    first, second = calls.nth(0), calls.nth(1)
    # The first call: system and user prompts, a rate-limited try, the reply's text
    # beside its two parallel tool calls, its reasoning folded.
    assert [first.locator(".msg .who").nth(i).inner_text() for i in range(4)] == [
        "system",
        "user",
        "✗ failed try · rate limited (429) · HTTP 429 · told to wait 0.01 s · waited "
        + first.locator(".failed-try .who").inner_text().split("waited ")[1],
        "assistant",
    ]
    assert SYSTEM in first.locator(".role-system").inner_text()
    assert PROMPT in first.locator(".role-user").inner_text()
    reply = first.locator(".role-assistant")
    assert SAID in reply.inner_text()
    assert reply.locator(".tool-call").count() == 2
    assert reply.locator(".tool-call").nth(1).inner_text().count(ARGUMENT.split('"')[0]) == 1
    assert json.dumps(ARGUMENT)[1:-1] in reply.locator(".tool-call").nth(0).inner_text()
    thought = reply.locator("details.reasoning")
    assert not thought.evaluate("d => d.open")  # folded until opened
    thought.locator("summary").click()
    assert THOUGHT in thought.inner_text()
    assert "120 in / 30 out tokens" in first.locator(".call-head").inner_text()
    assert "1 failed try" in first.locator(".call-head").inner_text()
    # The second call: both tools' results (named), the 5xx, the answer with reasoning.
    results = second.locator(".role-tool")
    assert results.count() == 2
    assert all(r.locator(".who").inner_text() == "tool result · echo" for r in results.all())
    assert FAILURE in second.locator(".failed-try").inner_text()
    assert "server error (5xx) · HTTP 502" in second.locator(".failed-try .who").inner_text()
    second.locator("details.reasoning summary").click()
    assert LAST_THOUGHT in second.locator(".role-assistant").inner_text()
    assert ANSWER in second.locator(".role-assistant").inner_text()
    # Beside it, the timeline, with the model calls among the commits.
    assert page.locator("#timeline li.kind-model_call").count() == 2
    watched.shot("transcript-" + name)
    watched.assert_clean()


@pytest.fixture(scope="module")
def url(store: Path) -> Iterator[str]:
    with serving(store) as served:
        yield served


def test_the_transcript_of_a_tool_agent_trial_served(url: str, watched: Watched) -> None:
    _check_transcript(watched, url, "served")
    page = watched.page
    page.goto(url + "#/benchmark?id=chat")
    row = page.locator("#model-calls tbody tr")
    row.wait_for()
    assert row.inner_text().split("\t")[:2] == ["chat-model", "2"]


def test_the_transcript_in_the_export(store: Path, watched: Watched, tmp_path: Path) -> None:
    out = _export(store, "chat", tmp_path)
    _check_transcript(watched, out.as_uri(), "export")
