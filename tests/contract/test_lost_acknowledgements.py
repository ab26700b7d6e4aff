"""Appends whose outcome a trial did not wait for: a failed batch, a lost acknowledgement.

Terminal and evaluation commits are handed over without waiting (`corral.runtime._acks`).
A whole batch that fails must then keep later appends out of the store (or a history
would have a gap), and a commit that landed though its acknowledgement was lost must
still reach the observers once.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from bench.durable_bench import Log, comparable
from bench.durable_bench import runner as fault_runner

import corral
from corral import Commit, RetryPolicy, TrialKey
from corral._errors import StoreError
from corral.testing import FaultStore

from .test_acknowledged_commits import RUN, rows, runner
from .test_faults import TARGET as FAULT_TARGET
from .test_faults import TASKS, TRIALS, Fault

pytestmark = pytest.mark.anyio
TARGET = ("t0", 0)


class FailTheTerminalsBatch(corral.SQLiteStore):
    """Fails, as a whole, the batch holding TARGET's terminal, once TARGET's evaluation
    has been handed over behind it."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.eval_queued = threading.Event()
        self.batch_started = threading.Event()
        self.failed = False

    def enqueue(self, key: TrialKey, commits: Any) -> Any:
        slot = super().enqueue(key, commits)
        if (key.task_id, key.trial) == TARGET and any(c.kind == "evaluation" for c in commits):
            self.eval_queued.set()
        return slot

    def _write_batch(self, conn: Any, requests: Any) -> Any:
        if not self.failed and any(
            (k.task_id, k.trial) == TARGET and any(c.kind == "terminal" for c in cs)
            for k, _, cs in requests
        ):
            self.failed = True
            self.batch_started.set()
            assert self.eval_queued.wait(10), "the evaluation was never handed over"
            raise StoreError("disk I/O error (injected)")
        return super()._write_batch(conn, requests)


def gated_runner(store: FailTheTerminalsBatch) -> corral.CorralRunner:
    """TARGET's evaluation is handed over while its terminal's batch is being written."""
    r = runner(store)
    env: Any = r.environments["e"]
    score = env.score

    async def evaluate(trial: corral.TrialRecord) -> Any:
        if (trial.task_id, trial.trial) == TARGET:
            await anyio.to_thread.run_sync(store.batch_started.wait, 10)
        return score(trial)

    env.score = evaluate
    return r


async def test_a_failed_batch_keeps_every_later_append_out(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with pytest.raises(BaseException) as info:
        await gated_runner(FailTheTerminalsBatch(path)).run("b", **RUN)
    assert (
        info.group_contains(StoreError)
        if isinstance(info.value, BaseExceptionGroup)
        else isinstance(info.value, StoreError)
    )
    found = rows(path)
    for task_id, trial in {(t, r) for (t, r, _) in found}:
        seqs = sorted(s for (t, r, s) in found if (t, r) == (task_id, trial))
        assert seqs == list(range(len(seqs))), (task_id, trial, seqs)  # no gap
    assert (*TARGET, 4) not in found  # the evaluation of a terminal that never landed

    reference = await runner(corral.MemoryStore()).run("b", **RUN)
    resumed = await runner(corral.SQLiteStore(path)).run("b", **RUN)
    assert comparable(resumed) == comparable(reference)


class Heard:
    def __init__(self) -> None:
        self.kinds: list[str] = []

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        if key == FAULT_TARGET:
            self.kinds.append(commit.kind)


@pytest.mark.parametrize("kind", ["evaluation", "terminal"])
async def test_a_commit_that_landed_without_its_acknowledgement_is_heard_of_once(
    kind: str,
) -> None:
    memory = corral.MemoryStore()
    store = FaultStore(memory, kind=kind, key=FAULT_TARGET, after=True, error=Fault(kind))
    heard = Heard()
    policy = RetryPolicy(max_retries=3, backoff_base=0)
    await fault_runner(store, Log(None), TASKS, retry_policy=policy).run(
        "b", trials_per_task=TRIALS, k_values=(1, 2), observers=[heard]
    )
    assert store.fired
    assert heard.kinds.count(kind) == 1
    assert heard.kinds == [c.kind for c in memory._histories[FAULT_TARGET]]
