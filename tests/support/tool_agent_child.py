"""A ToolAgent benchmark run in a child process that a test kills with SIGKILL.

    python -m tests.support.tool_agent_child STORE URL [replies]

The model is the parent's FakeChatServer at URL. Every acknowledged commit is
printed as a JSON line; the child then waits for one line on stdin, so the
parent decides after which acknowledgement the process dies. With ``replies``,
so is each model reply the agent got, before the runtime records it (a line
``{"kind": "replied"}``): the parent may kill the child between a model's reply
and its record.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio

import corral

from .tool_bench import Ledger, agent, tasks


def _pause(line: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()
    sys.stdin.readline()  # blocks the whole loop: the kill lands at this point


class Replies:
    """The agent, stopping after each reply it got until the parent says go on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def run_context(self, info: Any) -> Any:
        return self.inner.run_context(info)

    async def act(self, session: corral.AgentSession) -> Any:
        decision = await self.inner.act(session)
        _pause({"kind": "replied", "task": session.task_id, "trial": session.trial})
        return decision


class LockStep:
    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        _pause({"task": key.task_id, "trial": key.trial, "seq": commit.seq, "kind": commit.kind})


def runner(store: Path, url: str, replies: bool = False) -> corral.CorralRunner:
    teller = Replies(agent(url)) if replies else agent(url)
    return corral.CorralRunner(tasks(1), {"teller": teller}, {"ledger": Ledger()}, store=store)


async def main() -> None:
    store, url = sys.argv[1:3]
    replies = sys.argv[3:4] == ["replies"]
    await runner(Path(store), url, replies).run("kill", observers=[LockStep()])
    sys.stdout.write("done\n")
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
