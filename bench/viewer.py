"""The viewer's speed: time to the first screen of a benchmark's page, and export size.

    PYTHONPATH=src python bench/viewer.py [--trials 100 100000] [--export-trials 1000]

For each size: a store of that many finished trials (5 commits each, written
straight through the store API), ``corral view`` started cold, then Chromium
(/usr/bin/chromium, headless) opens the benchmark's page. "first screen" is from
navigation to the trial list's first page drawn (the Trials tab, shown first);
"summary" to pass@k drawn (the whole benchmark read: with it the other tabs and
the charts); "warm" a second visit once loaded; "filtered" a deep link
to a filtered, sorted page 2 once loaded. Then the export of ``--export-trials`` trials: its size.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from playwright.sync_api import Page, sync_playwright
from viewer_stores import big_store, serving  # bench/, beside this file

from corral.cli import main

TRIALS_PER_TASK = 10


def timed(page: Page, url: str, selector: str) -> float:
    start = time.perf_counter()
    page.goto(url)
    page.locator(selector).wait_for(timeout=120_000)
    return time.perf_counter() - start


def write(folder: Path, trials: int) -> Path:
    path = folder / f"store-{trials}.db"
    start = time.perf_counter()
    big_store(path, "bench", tasks=trials // TRIALS_PER_TASK, trials=TRIALS_PER_TASK)
    print(f"{trials:>9,} trials: store written in {time.perf_counter() - start:.1f} s", flush=True)
    return path


def measure(page: Page, path: Path, trials: int) -> None:
    first_row = f"#trials tbody tr:nth-child({min(50, trials)})"
    with serving(path) as url:
        page.goto("about:blank")
        first = timed(page, url + "#/benchmark?id=bench", first_row)
        start = time.perf_counter()
        page.locator("#passk").wait_for(timeout=120_000)
        summary = first + time.perf_counter() - start
        page.goto("about:blank")
        warm = timed(page, url + "#/benchmark?id=bench", first_row)
        page.goto("about:blank")  # a fresh page: nothing of the last one to mistake for it
        filtered = timed(
            page,
            url + "#/benchmark?id=bench&status=completed&sort=-duration&page=1",
            "#trials tbody tr:nth-child(10)",
        )
    print(
        f"{trials:>9,} trials: first screen {first:.2f} s (cold server) · summary {summary:.2f} s"
        f" · warm {warm:.2f} s · filtered+sorted page {filtered:.2f} s",
        flush=True,
    )


def export_size(folder: Path, trials: int) -> None:
    path = folder / "export.db"
    big_store(path, "bench", tasks=trials // TRIALS_PER_TASK, trials=TRIALS_PER_TASK)
    out = folder / "export.html"
    start = time.perf_counter()
    code = main(
        ["view", "--store", str(path), "--export", "bench", "-o", str(out)], standalone_mode=False
    )
    assert code == 0
    took = time.perf_counter() - start
    size = out.stat().st_size
    print(
        f"export of {trials:,} trials: {size:,} bytes ({size / trials:,.0f} per trial), "
        f"{took:.2f} s"
    )


def run() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, nargs="+", default=[100, 100_000])
    parser.add_argument("--export-trials", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        export_size(folder, args.export_trials)
        # Stores first: Playwright's sync API keeps an event loop running in this thread.
        paths = {trials: write(folder, trials) for trials in args.trials}
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--no-sandbox"]
            )
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            for trials, path in paths.items():
                measure(page, path, trials)
            browser.close()


if __name__ == "__main__":
    run()
