"""Stores for the viewer's tests and bench: real runs, hostile text, and a very large one."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from corral import (
    Action,
    BenchmarkTaskMetadata,
    Commit,
    CorralRunner,
    Evaluation,
    Final,
    SQLiteStore,
    ToolEffect,
    TrialKey,
    TrialRecord,
    Usage,
)
from corral.runtime import AgentSession
from corral.testing import FakeEnvironment, ScriptedAgent

#: Text that runs script if a page ever treats data as markup or a link.
HOSTILE = (
    '<script>alert("script")</script>',
    "</script><script>alert('close')</script>",
    "<img src=x onerror=alert('img')>",
    "javascript:alert('link')",
    '"><svg onload=alert("svg")>',
    "<!--<script>alert('comment')</script>",
)


def _agent(outputs: dict[str, Any]) -> ScriptedAgent:
    """One tool call (the task's text), then the task's output; a task whose output is an
    exception raises it."""

    def decide(session: AgentSession) -> Action | Final:
        if session.iteration == 0:
            return Action("write", {"text": session.inputs.get("text", ""), "n": session.trial})
        output = outputs.get(session.task_id, "done")
        if isinstance(output, Exception):
            raise output
        return Final(output)

    return ScriptedAgent(decide)


def _effect(action: Action, session: AgentSession) -> ToolEffect:
    text = action.arguments["text"]
    return ToolEffect({"wrote": text}, state={"written": [text], "count": 1})


async def run_benchmark(
    path: Path,
    benchmark_id: str,
    tasks: dict[str, BenchmarkTaskMetadata],
    outputs: dict[str, Any],
    passing: float,
    details: Any = None,
    **labels: Any,
) -> None:
    """A real run: each task's trials pass while ``trial / trials < passing``; ``labels``:
    its ``tags`` and ``note``."""

    def score(trial: TrialRecord) -> Evaluation:
        passed = trial.trial / 4 < passing and trial.status == "completed"
        return Evaluation(1.0 if passed else 0.0, passed, {"note": details} if details else {})

    env = FakeEnvironment("env", state={"written": []}, effect=_effect, evaluate=score)
    runner = CorralRunner(
        tasks, {"agent": _agent(outputs)}, {"env": env}, store=SQLiteStore(path), max_retries=0
    )
    await runner.run(benchmark_id, trials_per_task=4, k_values=(1, 2, 4), max_parallel=8, **labels)


def plain_tasks(count: int = 6) -> dict[str, BenchmarkTaskMetadata]:
    tasks = {
        f"task-{i}": BenchmarkTaskMetadata(
            "agent", "env", model=f"model-{i % 2}", inputs={"text": f"input {i}"}
        )
        for i in range(count)
    }
    tasks["child"] = BenchmarkTaskMetadata(
        "agent", "env", model="model-0", dependencies=("task-0",)
    )
    return tasks


def real_runs(path: Path) -> None:
    """Two benchmarks of the same tasks, ``base`` and a better ``better``; one task fails."""
    tasks = plain_tasks()
    outputs: dict[str, Any] = {"task-5": ValueError("the tool broke on row 7")}
    anyio.run(run_benchmark, path, "base", tasks, outputs, 0.5)
    anyio.run(run_benchmark, path, "better", tasks, outputs, 0.75)


async def _models_run(path: Path, benchmark_id: str, strict: bool) -> None:
    def score(trial: TrialRecord) -> Evaluation:
        large = trial.model == "large"
        passed = trial.trial < (3 if large else 1 if strict else 2)
        return Evaluation(float(passed), passed)

    env = FakeEnvironment("env", state={"written": []}, effect=_effect, evaluate=score)
    tasks = {
        f"job-{i}": BenchmarkTaskMetadata("agent", "env", inputs={"text": f"job {i}"})
        for i in range(3)
    }
    runner = CorralRunner(tasks, {"agent": _agent({})}, {"env": env}, store=SQLiteStore(path))
    if strict:
        await runner.rescore(benchmark_id, k_values=(1, 2, 4))
    else:
        await runner.run(
            benchmark_id, trials_per_task=4, k_values=(1, 2, 4), models=["small", "large"]
        )


def models_run(path: Path, benchmark_id: str = "models") -> None:
    """A several-models run: three tasks each on ``small`` (trials 0-1 pass) and ``large``
    (trials 0-2 pass)."""
    anyio.run(_models_run, path, benchmark_id, False)


def rescore_models_run(path: Path, benchmark_id: str = "models") -> None:
    """`models_run` rescored more strictly: ``small`` passes trial 0 only (pass@1 1/4)."""
    anyio.run(_models_run, path, benchmark_id, True)


def hostile_run(path: Path, benchmark_id: str = "hostile") -> None:
    """A real run whose task ids, inputs, outputs, observations, states, errors and
    evaluation details are all hostile text."""
    tasks = {
        text: BenchmarkTaskMetadata("agent", "env", model=text, inputs={"text": text})
        for text in HOSTILE
    }
    outputs: dict[str, Any] = {text: {"answer": text, "link": text} for text in HOSTILE}
    outputs[HOSTILE[2]] = ValueError(HOSTILE[2] + HOSTILE[1])
    anyio.run(
        partial(run_benchmark, tags=HOSTILE, note=" ".join(HOSTILE)),
        path,
        benchmark_id,
        tasks,
        outputs,
        0.5,
        " ".join(HOSTILE),
    )


async def _write_big(path: Path, benchmark_id: str, tasks: int, trials: int, steps: bool) -> None:
    store = SQLiteStore(path, synchronous="OFF")
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
    path: Path, benchmark_id: str, tasks: int, trials: int, *, steps: bool = True
) -> None:
    """``tasks * trials`` finished trials, written straight through the store API in
    batches: setup, (with ``steps``) an action and its effect, terminal, evaluation."""
    anyio.run(_write_big, path, benchmark_id, tasks, trials, steps)


@contextmanager
def serving(store: Path | str, *args: str) -> Iterator[str]:
    """``corral view`` on ``store`` at a free loopback port; yields its URL."""
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
        yield line.split()[1]
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
