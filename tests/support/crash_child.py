"""A benchmark run in a child process that a test kills with SIGKILL.

    python -m tests.support.crash_child STORE LOG TASKS TRIALS

Every acknowledged commit is printed as a JSON line; the child then waits for
one line on stdin before going on, so the parent decides exactly after which
acknowledgement the process dies.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from bench.durable_bench import Log, runner

import corral


class LockStep:
    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        line = {"task": key.task_id, "trial": key.trial, "seq": commit.seq, "kind": commit.kind}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        sys.stdin.readline()  # blocks the whole loop: the kill lands at this point


async def main() -> None:
    store, log, tasks, trials = sys.argv[1:5]
    where = store if "://" in store else Path(store)  # a PostgreSQL URI, or a file
    await runner(where, Log(Path(log)), int(tasks)).run(
        "crash",
        trials_per_task=int(trials),
        k_values=(1, 2),
        max_parallel=3,
        observers=[LockStep()],
    )
    sys.stdout.write("done\n")
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
