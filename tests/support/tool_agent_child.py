"""A ToolAgent benchmark run in a child process that a test kills with SIGKILL.

    python -m tests.support.tool_agent_child STORE URL

The model is the parent's FakeChatServer at URL. Every acknowledged commit is
printed as a JSON line; the child then waits for one line on stdin, so the
parent decides after which acknowledgement the process dies.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio

import corral

from .tool_bench import Ledger, agent, tasks


class LockStep:
    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        line = {"task": key.task_id, "trial": key.trial, "seq": commit.seq, "kind": commit.kind}
        sys.stdout.write(json.dumps(line) + "\n")
        sys.stdout.flush()
        sys.stdin.readline()  # blocks the whole loop: the kill lands at this point


def runner(store: Path, url: str) -> corral.CorralRunner:
    return corral.CorralRunner(tasks(1), {"teller": agent(url)}, {"ledger": Ledger()}, store=store)


async def main() -> None:
    store, url = sys.argv[1:3]
    await runner(Path(store), url).run("kill", observers=[LockStep()])
    sys.stdout.write("done\n")
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
