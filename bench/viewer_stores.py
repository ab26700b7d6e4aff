"""Stores for the viewer's bench and tests: a very large one written straight through the
store API, and ``corral view`` served on it."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio

from corral import Commit, CommitStore, SQLiteStore, TrialKey, Usage


async def _write_big(
    path: Path | CommitStore, benchmark_id: str, tasks: int, trials: int, steps: bool
) -> None:
    store = SQLiteStore(path, synchronous="OFF") if isinstance(path, Path) else path
    config = {
        "trials_per_task": trials,
        "tasks": {
            f"task-{t:06d}": {
                "agent_id": "agent",
                "environment_id": f"env-{t % 3}",
                "model": f"model-{t % 2}",
                "max_iterations": 10,
                "dependencies": [],
                "inputs": {},
            }
            for t in range(tasks)
        },
    }
    rng = random.Random(0)
    async with store.opened():
        await store.register_benchmark(benchmark_id, config)
        pending = []
        for t in range(tasks):
            for r in range(trials):
                at = 1.8e9 + t * trials + r
                error = rng.random() < 0.05
                commits = [Commit(0, "setup", {"state": {"x": 0}, "previous_trial": None}, at)]
                if steps:
                    action = {"tool": "calc", "arguments": {"e": "1+1"}, "turn": 0, "index": 0}
                    commits += [
                        Commit(1, "action", action, at + 0.1, Usage(100 + r, 20, 0.001)),
                        Commit(2, "tool_effect", {"action_seq": 1, "observation": "2"}, at + 0.2),
                    ]
                commits.append(
                    Commit(
                        len(commits),
                        "terminal",
                        {
                            "status": "error" if error else "completed",
                            "output": None if error else "2",
                            "error": f"ValueError: bad row {r}" if error else None,
                            "attempts": 1,
                            "state": {"x": 2},
                        },
                        at + 0.3 + rng.random(),
                    )
                )
                if not error:
                    passed = rng.random() < 0.6
                    payload = {"score": float(passed), "passed": passed, "details": {}}
                    commits.append(Commit(len(commits), "evaluation", payload, at + 1.5))
                pending.append(store.enqueue(TrialKey(benchmark_id, f"task-{t:06d}", r), commits))
            if len(pending) >= 5000:
                for p in pending:
                    await p.wait()
                pending = []
        for p in pending:
            await p.wait()


def big_store(
    path: Path | CommitStore, benchmark_id: str, tasks: int, trials: int, *, steps: bool = True
) -> None:
    """``tasks * trials`` finished trials, written straight through the store API in
    batches: setup, (with ``steps``) an action and its effect, terminal, evaluation.
    ``path``: an SQLite file (written without fsync), or any store."""
    anyio.run(_write_big, path, benchmark_id, tasks, trials, steps)


@contextmanager
def view_process(store: Path | str, *args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``corral view`` on ``store`` at a free loopback port, once it serves: its
    process and URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "corral", "view", "--store", str(store), "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith("serving "):
            raise AssertionError(f"corral view did not start: {line}{process.communicate()[1]}")
        yield process, line.split()[1]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()


@contextmanager
def serving(store: Path | str, *args: str) -> Iterator[str]:
    """``corral view`` on ``store`` at a free loopback port; yields its URL."""
    with view_process(store, *args) as (_, url):
        yield url
