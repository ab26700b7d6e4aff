"""The trial page's transcript in a real browser (Playwright on Debian's Chromium): a
ToolAgent trial with parallel tool calls, a rate-limited try, a 5xx and reasoning,
every recorded field of its model calls hostile, shown as text, served and exported."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from bench.viewer_stores import serving
from playwright.sync_api import Locator, expect

from ..support.transcript_run import (
    AFTER,
    ANSWER,
    ARGUMENT,
    BEFORE,
    BETWEEN,
    FAILURE,
    FOUND,
    FOUND_AT,
    GRADER_ASKS,
    GRADER_SAYS,
    LAST_THOUGHT,
    PROMPT,
    SAID,
    SYSTEM,
    THOUGHT,
    cut_run,
    interleaved_run,
    rerun_graded_run,
    transcript_run,
    web_search_run,
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
    # Beside it, the timeline, with the model calls among the commits: summarised,
    # a link to their place in the transcript, the stored record fetched when opened.
    in_timeline = page.locator("#timeline li.kind-model_call")
    assert in_timeline.count() == 2
    summary = in_timeline.nth(0).locator(".tool").inner_text()
    assert "model chat-model" in summary and "2 tool call(s): echo, echo" in summary
    assert SYSTEM not in in_timeline.nth(0).inner_text()
    route = page.evaluate("location.hash")
    in_timeline.nth(1).locator("a.to-call").click()
    assert page.evaluate("location.hash") == route  # scrolled, not navigated
    in_timeline.nth(0).locator("details.raw-commit summary").click()
    raw = in_timeline.nth(0).locator("details.raw-commit")
    if name == "served":
        raw.locator("details.fold summary").first.click()
        expect(raw).to_contain_text(json.dumps(SYSTEM)[1:-1])  # as text, never markup
    else:
        expect(raw).to_contain_text("an export leaves the stored record out")  # on toggle
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


def test_a_rerun_and_a_scorer_call_in_the_transcript(watched: Watched, tmp_path: Path) -> None:
    path = tmp_path / "rerun.db"
    off_loop(rerun_graded_run, path)
    for base, name in _served_and_exported(path, "rerun", tmp_path):
        page = watched.page
        page.goto(base + "#/trial?" + _query(id="rerun", task="acct-1", trial="0"))
        page.locator("#transcript section.call").first.wait_for()
        marks = page.locator("#transcript .attempt")
        assert marks.nth(0).inner_text() == "attempt 1"
        second = marks.nth(1).inner_text()
        assert second.startswith("attempt 2 (rerun at ") and "ended error" in second
        heads = page.locator("#transcript .call-head").all_inner_texts()
        assert [h.split(" · ")[0] for h in heads] == [
            "call 1",
            "call 1",
            "call 2",
            "call 3",
            "scorer call 1",
        ]
        scorer = page.locator("#transcript section.call.scorer")
        assert GRADER_ASKS in scorer.inner_text() and GRADER_SAYS in scorer.inner_text()
        watched.shot("transcript-rerun-" + name)
        watched.assert_clean()


def test_a_reply_cut_at_the_token_limit_says_so(watched: Watched, tmp_path: Path) -> None:
    # The page had each reply's finish_reason and showed it nowhere in the transcript: a
    # reply the provider cut at its token limit read as whole, an empty one as nothing.
    path = tmp_path / "cut.db"
    off_loop(cut_run, path)
    for base, name in _served_and_exported(path, "cut", tmp_path):
        page = watched.page
        for task, said in (("partial", "The answer is"), ("empty", "(no text)")):
            page.goto(base + "#/trial?" + _query(id="cut", task=task, trial="0"))
            # The first task's transcript stays until the second's is drawn (a new
            # hash, the same page): waited for by what this one says.
            expect(page.locator("#transcript .role-assistant")).to_contain_text(said)
            head = page.locator("#transcript .call-head").inner_text()
            assert head.endswith(" · stopped: length"), head
            reply = page.locator("#transcript .role-assistant").inner_text()
            assert reply.split("\n", 1)[1].strip() == said, reply
        watched.shot("transcript-cut-" + name)
        watched.assert_clean()


def test_a_replys_text_stands_between_its_tool_calls_as_written(
    watched: Watched, tmp_path: Path
) -> None:
    # The reply's text was shown whole above its tool calls: what it wrote between and
    # after them read as written before them.
    for reply in _first_replies(watched, tmp_path, interleaved_run, "mixed"):
        shown = reply.inner_text()
        first, second = shown.index("→ echo"), shown.rindex("→ echo")
        assert first < second
        assert shown.index(BEFORE) < first < shown.index(BETWEEN) < second
        assert second < shown.index(AFTER), shown


def test_a_web_search_stands_in_the_reply_where_it_was_made(
    watched: Watched, tmp_path: Path
) -> None:
    # A server tool's use and results (Anthropic's web search) were not recorded: the
    # reply showed its text and tool call only.
    for reply in _first_replies(watched, tmp_path, web_search_run, "searched"):
        assert reply.locator(".server-tool").count() == 2
        shown = reply.inner_text()
        search = shown.index("⚙ server_tool_use web_search")
        found = shown.index(f"{FOUND} <{FOUND_AT}>")  # as text: no markup made of it
        assert shown.index(BEFORE) < search < found < shown.index(BETWEEN)
        assert shown.index(BETWEEN) < shown.index("→ echo"), shown
        assert "<b>echo</b> semantics" in shown


def _first_replies(
    watched: Watched, tmp_path: Path, made: Callable[[Path, str], None], benchmark_id: str
) -> Iterator[Locator]:
    """The first reply of ``made``'s trial on its trial page, served and then exported
    (the page checked clean of errors after each)."""
    path = tmp_path / f"{benchmark_id}.db"
    off_loop(made, path, benchmark_id)
    for base, _ in _served_and_exported(path, benchmark_id, tmp_path):
        page = watched.page
        page.goto(base + "#/trial?" + _query(id=benchmark_id, task="task", trial="0"))
        page.locator("#transcript section.call").first.wait_for()
        yield page.locator("#transcript section.call").first.locator(".role-assistant")
        watched.assert_clean()


def _served_and_exported(
    path: Path, benchmark_id: str, tmp_path: Path
) -> Iterator[tuple[str, str]]:
    """The viewer's base address for ``path`` served, then for its export of
    ``benchmark_id`` (in ``tmp_path``), each with its name for screenshots."""
    with serving(path) as url:
        yield url, "served"
        yield _export(path, benchmark_id, tmp_path).as_uri(), "export"
