"""Stores for the viewer's tests: real runs, several models, hostile text (the very large
one is `bench.viewer_stores.big_store`)."""

from __future__ import annotations

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
        # A named score, from which the last trial abstains.
        quality = {"quality": 0.8 if large else 0.4} if trial.trial < 3 else {}
        return Evaluation(float(passed), passed, {}, quality)

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
    (trials 0-2 pass), with a named score ``quality`` (0.4 on small, 0.8 on large; trial 3
    abstains)."""
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


async def _unfinished_run(path: Path, benchmark_id: str, trials: int, ran: tuple[int, ...]) -> None:
    store = SQLiteStore(path)
    entry = {"agent_id": "agent", "environment_id": "env", "dependencies": [], "inputs": {}}
    config = {"trials_per_task": trials, "tasks": {"solo": entry, "idle": entry}}
    setup = Commit(0, "setup", {"state": {}, "previous_trial": None}, 1.8e9)
    terminal = {"status": "completed", "output": "ok", "error": None, "attempts": 1, "state": {}}
    evaluation = {"score": 1.0, "passed": True, "details": {}}
    commits = [setup, Commit(1, "terminal", terminal, 1.8e9 + 1)]
    commits.append(Commit(2, "evaluation", evaluation, 1.8e9 + 2))
    async with store.opened():
        await store.register_benchmark(benchmark_id, config)
        for trial in ran:
            await store.append(TrialKey(benchmark_id, "solo", trial), commits)


def unfinished_run(
    path: Path, benchmark_id: str = "unfinished", trials: int = 2, ran: tuple[int, ...] = (0,)
) -> None:
    """A benchmark mid-run: of two tasks' two trials each (or ``trials``), only ``solo``
    #0 (or the trials ``ran``) has run."""
    anyio.run(_unfinished_run, path, benchmark_id, trials, ran)


async def _named_tasks_run(path: Path, benchmark_id: str, names: list[str]) -> None:
    store = SQLiteStore(path)
    entry = {"agent_id": "agent", "environment_id": "env", "inputs": {}}
    terminal = {"status": "completed", "output": "ok", "error": None, "attempts": 1, "state": {}}
    commits = [
        Commit(0, "setup", {"state": {}, "previous_trial": None}, 1.8e9),
        Commit(1, "terminal", terminal, 1.8e9 + 1),
        Commit(2, "evaluation", {"score": 1.0, "passed": True, "details": {}}, 1.8e9 + 2),
    ]
    async with store.opened():
        config = {"trials_per_task": 1, "tasks": dict.fromkeys(names, entry)}
        await store.register_benchmark(benchmark_id, config)
        for task in names:
            await store.append(TrialKey(benchmark_id, task, 0), commits)


def named_tasks_run(path: Path, benchmark_id: str, names: list[str]) -> None:
    """One passed trial of each task in ``names``."""
    anyio.run(_named_tasks_run, path, benchmark_id, names)


async def _uneven_models_run(path: Path, benchmark_id: str, model: str) -> None:
    store = SQLiteStore(path)

    def entry(model: str) -> dict[str, Any]:
        return {"agent_id": "agent", "environment_id": "env", "model": model, "inputs": {}}

    tasks = {"a@small": entry("small"), f"a@{model}": entry(model), "b@small": entry("small")}
    terminal = {"status": "completed", "output": "ok", "error": None, "attempts": 1, "state": {}}
    commits = [
        Commit(0, "setup", {"state": {}, "previous_trial": None}, 1.8e9),
        Commit(1, "terminal", terminal, 1.8e9 + 1),
        Commit(2, "evaluation", {"score": 1.0, "passed": True, "details": {}}, 1.8e9 + 2),
    ]
    async with store.opened():
        await store.register_benchmark(benchmark_id, {"trials_per_task": 1, "tasks": tasks})
        for task in tasks:
            await store.append(TrialKey(benchmark_id, task, 0), commits)


def uneven_models_run(path: Path, model: str, benchmark_id: str = "uneven") -> None:
    """A several-models run whose task ``b`` ran on ``small`` only, ``a`` on ``small`` and
    on ``model``."""
    anyio.run(_uneven_models_run, path, benchmark_id, model)


async def _append(path: Path, key: TrialKey, commits: list[Commit]) -> None:
    store = SQLiteStore(path)
    async with store.opened():
        await store.append(key, commits)


def append_commits(path: Path, key: TrialKey, commits: list[Commit]) -> None:
    """``commits`` appended to the trial ``key`` (its next ones: a trial going on)."""
    anyio.run(_append, path, key, commits)
