"""kill -9 mid-run: the trial heads the store kept equal the fold of every commit that
landed, after each kill and after the resume that finishes the benchmark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from bench.durable_bench import Log, runner

from corral.store import open_store

from ..contract.test_trial_heads import check_same
from .test_kill9 import TASKS, TRIALS, run_child_until_killed, where  # noqa: F401 - fixture

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.anyio
async def test_heads_are_exact_after_kill9_and_resume(tmp_path: Path, where: Any) -> None:  # noqa: F811
    log = tmp_path / "log.jsonl"
    for kill_after in (9, 21):  # acknowledged commits before each kill
        await anyio.to_thread.run_sync(run_child_until_killed, where, log, kill_after)
        await check_same(open_store(where), "crash")
    await runner(where, Log(log), TASKS).run(
        "crash", trials_per_task=TRIALS, k_values=(1, 2), max_parallel=3
    )
    await check_same(open_store(where), "crash")
