"""The viewer's transcript of a 30-turn trial on a 10,000-trial benchmark, cold and warm.

    PYTHONPATH=src:. python bench/transcript_view.py [--trials 10000] [--turns 30]

A store of ``--trials`` finished trials (bench/viewer_stores.py), one of which
(task-000000 #0) is then rerun as a ``--turns``-turn ToolAgent trial against a
local FakeChatServer (its commits appended after a ``reopen``, as ``run(...,
rerun=...)`` would). ``corral view`` is started cold and Chromium (headless)
opens that trial's page: "cold" is from navigation to every call of the
transcript drawn (the benchmark read first: the page needs its trial list),
"warm" a second visit. Wall-clock times: they depend on the machine's load.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import anyio
from playwright.sync_api import sync_playwright

import corral
from corral import Commit, TrialKey

sys.path.insert(0, str(Path(__file__).parent))
from model_calls import storage_run  # noqa: E402 (bench/, beside this file)
from viewer_stores import big_store, serving  # noqa: E402

TRIALS_PER_TASK = 10


async def _append(path: Path, commits: list[Commit]) -> None:
    store = corral.SQLiteStore(path)
    async with store.opened():
        key = TrialKey("bench", "task-000000", 0)
        head = len(await store.history(key))
        reopen = Commit(head, "reopen", {"reason": "rerun", "previous_status": "completed"}, 2e9)
        moved = [
            Commit(head + 1 + c.seq, c.kind, c.payload, c.created_at, c.usage) for c in commits
        ]
        await store.append(key, [reopen, *moved])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "store.db"
        big_store(path, "bench", tasks=args.trials // TRIALS_PER_TASK, trials=TRIALS_PER_TASK)
        commits = [c for c in storage_run(args.turns) if c.kind != "evaluation"]
        anyio.run(_append, path, commits)
        calls = sum(1 for c in commits if c.kind == "model_call")
        last = f"#transcript section.call:nth-of-type({calls})"
        with sync_playwright() as playwright, serving(path) as url:
            browser = playwright.chromium.launch(
                executable_path="/usr/bin/chromium", args=["--no-sandbox"]
            )
            page = browser.new_page()
            target = url + "#/trial?id=bench&task=task-000000&trial=0"
            times = []
            for _ in range(2):
                page.goto("about:blank")
                start = time.perf_counter()
                page.goto(target)
                page.locator(last).wait_for(timeout=120_000)
                times.append(time.perf_counter() - start)
            browser.close()
    print(
        f"{args.trials:,} trials, a {args.turns}-turn trial's transcript ({calls} calls): "
        f"cold {times[0]:.2f} s (the benchmark read first) · warm {times[1]:.2f} s"
    )


if __name__ == "__main__":
    main()
