"""The viewer in a real browser: Playwright driving Debian's Chromium, headless.

Skipped (with the reason) where /usr/bin/chromium is missing, except under CI=true,
where .ci/run installs it and these tests must run. Playwright never downloads a
browser here. Screenshots of each page are kept in tests/artifacts/viewer/.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from bench.viewer_stores import big_store, serving

from corral.cli import main

from ..support.viewer_stores import HOSTILE, hostile_run, real_runs

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = Path(__file__).parents[1] / "artifacts" / "viewer"

if not CHROMIUM.exists() and os.environ.get("CI") != "true":
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)", allow_module_level=True)

from playwright.sync_api import Browser, Page, expect, sync_playwright  # noqa: E402


def off_loop(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``func`` (which runs its own event loop) in a thread: Playwright's sync API
    keeps an asyncio loop running in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(func, *args, **kwargs).result()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield launched
        launched.close()


class Watched:
    """A page that records every dialog (none may ever open) and every script error."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        page.on("dialog", self._dialog)
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on(
            "console",
            lambda message: self.errors.append(message.text) if message.type == "error" else None,
        )

    def _dialog(self, dialog: object) -> None:
        self.dialogs.append(getattr(dialog, "message", "?"))
        dialog.dismiss()  # type: ignore[attr-defined]

    def shot(self, name: str) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        self.page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)

    def assert_clean(self) -> None:
        assert self.dialogs == [], self.dialogs
        assert self.errors == [], self.errors
        # No element that data could have smuggled in.
        assert self.page.locator("img, svg, iframe, object, embed").count() == 0
        assert self.page.locator("script").count() <= 2


@pytest.fixture
def watched(browser: Browser) -> Iterator[Watched]:
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    yield Watched(page)
    context.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("viewer-browser") / "store.db"
    off_loop(real_runs, path)
    off_loop(hostile_run, path)
    return path


@pytest.fixture(scope="module")
def url(store: Path) -> Iterator[str]:
    with serving(store) as served:
        yield served


def test_walk_benchmarks_benchmark_filter_trial_compare(url: str, watched: Watched) -> None:
    page = watched.page
    page.goto(url)
    page.locator("#benchmarks a", has_text="base").click()
    page.locator("#passk").wait_for()
    assert "pass@1 0.429" in page.locator("#passk").inner_text()
    assert page.locator("#scores tbody tr").count() == 9  # k = 1, 2, 4: overall and 2 models
    examples = page.locator("#details .errors a")
    assert examples.all_inner_texts() == ["task-5#0", "task-5#1", "task-5#2"]
    watched.shot("1-benchmark")

    # Filter: only the failed trials; the filter lands in the URL.
    page.select_option("select[name=status]", "error")
    page.wait_for_function("location.hash.includes('status=error')")
    expect(page.locator("#trials tbody tr")).to_have_count(4)
    watched.shot("2-filtered")
    filtered = page.url

    # Keyboard: j selects the first row, Enter opens it, j goes to the next in the list.
    page.keyboard.press("j")
    page.keyboard.press("Enter")
    page.locator("#timeline").wait_for()
    assert "task-5" in page.locator("h1").inner_text()
    assert "the tool broke on row 7" in page.locator("#timeline").inner_text()
    assert page.locator("#outcome").inner_text().startswith("error")
    watched.shot("3-trial")
    page.keyboard.press("j")
    page.locator("h1", has_text="#1").wait_for()
    assert "status=error" in page.url  # still walking the filtered list
    page.keyboard.press("u")
    page.locator("#trials").wait_for()
    assert page.url == filtered

    # A task page: the reflective chain and the dependency links.
    page.goto(url + "#/task?id=base&task=task-0")
    page.locator("#rounds").wait_for()
    assert "child" in page.locator("main").inner_text()
    watched.shot("4-task")

    # Deep links: the filtered list opens as it was, in a fresh page.
    page.goto("about:blank")
    page.goto(filtered)
    expect(page.locator("#trials tbody tr")).to_have_count(4)

    # Compare, from the benchmarks page.
    page.goto(url)
    page.locator("#benchmarks").wait_for()
    watched.shot("0-benchmarks")
    page.select_option("select[name=a]", "base")
    page.select_option("select[name=b]", "better")
    page.click("#compare")
    page.locator("#paired-1").wait_for()
    assert "B − A on pass@1: 0.214 [" in page.locator("#paired-1").inner_text()
    assert page.locator("#compared tr.outcome-improved").count() == 6
    watched.shot("5-compare")
    watched.assert_clean()


def _visit_hostile(watched: Watched, base: str) -> None:
    """Every page of the hostile benchmark; each must show the text as text."""
    page = watched.page
    page.goto(base + "#/")
    page.locator("#benchmarks").wait_for()
    page.goto(base + "#/benchmark?id=hostile")
    page.locator("#trials tbody tr").first.wait_for()
    page.locator("#details").wait_for()
    text = page.locator("main").inner_text()
    assert HOSTILE[0] in text and HOSTILE[2] in text
    watched.shot("hostile-benchmark-" + ("export" if base.startswith("file:") else "served"))
    for task in HOSTILE:
        page.goto(base + "#/task?" + _query(id="hostile", task=task))
        page.locator("#rounds").wait_for()
        assert page.locator("h1").inner_text() == task
        page.goto(base + "#/trial?" + _query(id="hostile", task=task, trial="0"))
        page.locator("#timeline").wait_for()
        page.locator("#raw > summary").click()
        for fold in page.locator("details.fold summary").all():
            fold.click()  # unfold everything: long values render on demand
        assert task in page.locator("#timeline").inner_text()
    # A filter made of hostile text goes through the URL and back into the form.
    page.goto(base + "#/benchmark?" + _query(id="hostile", error_has=HOSTILE[1]))
    page.locator("#trials tbody tr").first.wait_for()
    assert page.input_value("input[name=error_has]") == HOSTILE[1]
    watched.assert_clean()


def _query(**params: str) -> str:
    from urllib.parse import urlencode

    return urlencode(params)


def test_no_script_runs_from_data_on_served_pages(url: str, watched: Watched) -> None:
    _visit_hostile(watched, url)


def test_no_script_runs_from_data_in_the_export(
    store: Path, watched: Watched, tmp_path: Path
) -> None:
    out = tmp_path / "hostile.html"
    args = ["view", "--store", str(store), "--export", "hostile", "-o", str(out)]
    assert off_loop(main, args, standalone_mode=False) == 0
    _visit_hostile(watched, out.as_uri())
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(out, ARTIFACTS / "hostile-export.html")


def test_a_100000_trial_benchmark_opens_at_once(
    tmp_path_factory: pytest.TempPathFactory, watched: Watched
) -> None:
    path = tmp_path_factory.mktemp("viewer-large") / "large.db"
    off_loop(big_store, path, "large", tasks=10_000, trials=10, steps=False)  # quicker to write
    page = watched.page
    with serving(path) as served:
        start = time.perf_counter()
        page.goto(served + "#/benchmark?id=large")
        page.locator("#trials tbody tr:nth-child(50)").wait_for()
        first_screen = time.perf_counter() - start
        watched.shot("6-large-first-screen")
        # Loose: the target (< 2 s) is measured by bench/viewer.py on a quiet machine.
        # The first page comes from the first rows read, not from the whole benchmark
        # (reading all of it takes longer than this test: filters wait for it, see
        # bench/viewer.py; the HTTP tests check filters and order on a small store).
        assert first_screen < 10, first_screen
        expect(page.locator("#trials tbody tr")).to_have_count(50)
        assert page.locator("#trials tbody tr td").first.inner_text() == "task-000000"
    watched.assert_clean()
