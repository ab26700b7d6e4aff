"""asyncio's own ``Task.cancel()`` on ``run()`` is as safe as an anyio cancel scope.

anyio shields its worker threads from cancel scopes, not from ``Task.cancel()``:
the caller then returns while the thread still runs. These tests cancel runs at
random moments (after N commits heard, or after N turns of the event loop) and
check that the store stays consistent: a resume finishes with the report of an
uninterrupted run, and nothing leaks (no ProgrammingError, no "Task exception was
never retrieved"). ``CORRAL_CANCEL_SEED`` replays a failure.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from bench.durable_bench import Log, runner

import corral
from corral import Commit, TrialKey

TASKS, TRIALS = 3, 2
RUN: dict[str, Any] = {"trials_per_task": TRIALS, "k_values": (1, 2), "max_parallel": 3}
SEED = int(os.environ.get("CORRAL_CANCEL_SEED", "20240611"))


def outcome(report: corral.BenchmarkReport) -> dict[Any, Any]:
    """Per trial: status, output and evaluation; and pass@k."""
    trials = {
        (task_id, t.trial): (str(t.status), t.output, t.evaluation)
        for task_id, task in report.tasks.items()
        for t in task.trials
    }
    return {"trials": trials, "pass_at_k": report.pass_at_k}


class CancelAfterCommits:
    """Cancels the task once it has heard of ``after`` commits."""

    def __init__(self, after: int) -> None:
        self.after, self.heard = after, 0
        self.task: asyncio.Task[Any] | None = None

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        self.heard += 1
        if self.heard == self.after and self.task is not None:
            self.task.cancel()


async def interrupted(
    make_store: Callable[[], corral.CommitStore], rng: random.Random, context: str
) -> None:
    """One run of the benchmark, cancelled with Task.cancel() at a random moment."""
    by_commits = rng.random() < 0.5
    observer = CancelAfterCommits(rng.randrange(1, TASKS * TRIALS * 7))
    observers = [observer] if by_commits else []
    task = asyncio.ensure_future(
        runner(make_store(), Log(None), TASKS).run("b", **RUN, observers=observers)
    )
    observer.task = task
    if not by_commits:
        for _ in range(rng.randrange(0, 120)):
            await asyncio.sleep(0)
        task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    except BaseException as exc:  # anything else leaked out of a cancelled run
        raise AssertionError(f"{context}: the cancelled run raised {exc!r}") from exc


async def cancel_loop(
    iterations: int, store_for: Callable[[int], Callable[[], corral.CommitStore]], seed: int
) -> None:
    leaked: list[dict[str, Any]] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: leaked.append(ctx))
    rng = random.Random(seed)
    reference = outcome(await runner(corral.MemoryStore(), Log(None), TASKS).run("b", **RUN))
    for i in range(iterations):
        context = f"seed {seed}, iteration {i}"
        make_store = store_for(i)
        for _ in range(rng.choice((1, 1, 2))):  # sometimes the resume is cancelled too
            await interrupted(make_store, rng, context)
        resumed = await runner(make_store(), Log(None), TASKS).run("b", **RUN)
        assert outcome(resumed) == reference, context
        assert not leaked, f"{context}: {leaked}"


def test_task_cancel_at_random_moments_with_sqlite(tmp_path: Path) -> None:
    def store_for(i: int) -> Callable[[], corral.CommitStore]:
        return lambda: corral.SQLiteStore(tmp_path / f"{i}.db")  # a fresh object per run

    asyncio.run(cancel_loop(100, store_for, SEED))


def test_task_cancel_at_random_moments_with_memory() -> None:
    def store_for(i: int) -> Callable[[], corral.CommitStore]:
        memory = corral.MemoryStore()
        return lambda: memory

    asyncio.run(cancel_loop(200, store_for, SEED + 1))


@pytest.mark.anyio
async def test_a_task_cancel_during_a_scan_waits_for_the_reader_thread(tmp_path: Path) -> None:
    """Deterministic: the scan's thread is held inside SQLite when Task.cancel() lands.

    Before, the cancelled scan closed its cursor on the loop thread while the
    worker still fetched with it (a ProgrammingError, or a segfault).
    """
    store = corral.SQLiteStore(tmp_path / "s.db")
    async with store.opened():
        for t in range(300):
            key = TrialKey("b", f"t{t:03d}", 0)
            await store.append(key, [Commit(s, "action", {"n": s}, 1.0) for s in range(3)])
        entered, release = threading.Event(), threading.Event()

        def hold() -> int:  # runs on the reader's thread, inside a statement
            entered.set()
            release.wait(10)
            return 0

        raw = getattr(store._reader, "_conn", store._reader)
        raw.set_progress_handler(hold, 100)

        async def consume() -> int:
            return sum([len(chunk) async for chunk in store.scan("b", chunk=50)])

        task = asyncio.ensure_future(consume())
        await anyio.to_thread.run_sync(entered.wait, 10)
        task.cancel()
        for _ in range(20):
            await asyncio.sleep(0)
        returned_early = task.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert not returned_early, "Task.cancel() returned while the thread was in SQLite"
        assert len(await store.summaries("b")) == 300  # the connection is fine afterwards


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # Task.cancel() is asyncio's
