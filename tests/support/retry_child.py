"""A trial whose first attempt fails and whose retry is killed, for a kill -9 test.

    python -m tests.support.retry_child STORE

The agent raises on attempt 0 (after the setup commit), then asks for one action;
every acknowledged commit is printed as a JSON line (`tests.support.crash_child.LockStep`),
so the parent kills the child once the retry's action is durable.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import anyio

import corral
from corral import Action, AgentSession, BenchmarkTaskMetadata, Final, RetryPolicy
from corral.testing import FakeEnvironment, ScriptedAgent

from .crash_child import LockStep


def decide(fail_first: bool) -> Callable[[AgentSession], Action | Final]:
    def act(session: AgentSession) -> Action | Final:
        if session.steps:
            return Final(1)
        if fail_first and session.attempt == 0:
            raise ConnectionError("the first attempt went wrong")
        return Action("noop", {})

    return act


def runner(store: Path, *, fail_first: bool) -> corral.CorralRunner:
    return corral.CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(decide(fail_first))},
        {"e": FakeEnvironment()},
        store=store,
        retry_policy=RetryPolicy(max_retries=2, backoff_base=0),
    )


async def main() -> None:
    await runner(Path(sys.argv[1]), fail_first=True).run("retry", observers=[LockStep()])
    sys.stdout.write("done\n")
    sys.stdout.flush()


if __name__ == "__main__":
    anyio.run(main)
