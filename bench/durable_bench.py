"""A deterministic benchmark for durability tests, importable by a crashing child process.

Each trial takes three turns: one action, a parallel turn of two actions, then
Final(total). The environment appends every execution's step key to a log and
the agent every decision it is asked for, so tests can count repeats.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import corral
from corral import Action, BenchmarkTaskMetadata, Evaluation, Final, ToolEffect


class Log:
    """Append-only JSON lines, flushed per line so a kill -9 keeps every line written."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.lines: list[dict[str, Any]] = []

    def write(self, **entry: Any) -> None:
        self.lines.append(entry)
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(entry) + "\n")

    def read(self) -> list[dict[str, Any]]:
        if self.path is None:
            return list(self.lines)
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]


class TurnAgent:
    def __init__(self, log: Log) -> None:
        self.log = log

    async def act(self, session: corral.AgentSession) -> Any:
        self.log.write(
            kind="act", task=session.task_id, trial=session.trial, turn=session.iteration
        )
        base = int(session.inputs["base"])
        if session.iteration == 0:
            return Action("add", {"n": base})
        if session.iteration == 1:
            return [Action("add", {"n": session.trial + 1}), Action("mul", {"n": 2})]
        return Final(session.state)


class ArithmeticEnvironment:
    def __init__(self, log: Log) -> None:
        self.log = log

    async def setup(self, session: corral.AgentSession) -> int:
        return 0

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        self.log.write(
            kind="execute", task=session.task_id, trial=session.trial, key=session.step_key
        )
        n = int(action.arguments["n"])
        state = session.state + n if action.tool == "add" else session.state * n
        return ToolEffect(observation=state, state=state)

    async def evaluate(self, trial: corral.TrialRecord) -> Evaluation:
        self.log.write(kind="evaluate", task=trial.task_id, trial=trial.trial)
        value = int(trial.output)
        return Evaluation(score=float(value % 7), passed=value % 3 != 0)


def tasks(count: int) -> dict[str, BenchmarkTaskMetadata]:
    return {
        f"task-{i:03d}": BenchmarkTaskMetadata(
            agent_id="turns", environment_id="arith", inputs={"base": i}
        )
        for i in range(count)
    }


def runner(
    store: corral.CommitStore | str | os.PathLike[str], log: Log, count: int, **kw: Any
) -> corral.CorralRunner:
    return corral.CorralRunner(
        tasks(count),
        {"turns": TurnAgent(log)},
        {"arith": ArithmeticEnvironment(log)},
        store=store,
        **kw,
    )


def comparable(report: corral.BenchmarkReport) -> dict[str, Any]:
    """What must be equal between an interrupted and an uninterrupted run."""
    return {
        "pass_at_k": report.pass_at_k,
        "counts": report.counts,
        "trials": {
            (task_id, t.trial): (
                str(t.status),
                t.output,
                t.evaluation,
                t.commits,
            )
            for task_id, task in report.tasks.items()
            for t in task.trials
        },
    }
