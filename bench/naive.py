"""The naive runner: what common runners do, as a baseline for Corral.

One task per trial is created up front, and each trial acquires one semaphore
per limit in turn (global, then its task, its model, its environment), runs
its agent to `Final` (or ``max_iterations``), then takes an evaluation slot
and scores itself. Nothing is durable: records stay in a list in memory.

It runs the same `corral.Agent` and `corral.Environment` objects as Corral
(with a `corral.AgentSession`), on any anyio backend, so the throughput
workload runs it on asyncio and the scheduling workload on trio's
`MockClock`. This is the admission pattern of the bug report in
``shared/seeds/004_*``: live tasks grow with the input, and a trial that holds
the global slot while it waits for its model's slot idles capacity.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field

import anyio

import corral
from corral import Action, BenchmarkTaskMetadata, Final, ToolEffect, TrialRecord, TrialStatus


@dataclass(frozen=True, slots=True)
class NaiveLimits:
    """The limits the naive runner enforces, one semaphore each."""

    max_parallel: int
    max_parallel_per_task: int = 1
    max_parallel_evaluations: int | None = None
    max_parallel_by_model: Mapping[str, int] = field(default_factory=dict)
    max_parallel_by_environment: Mapping[str, int] = field(default_factory=dict)


async def run_naive(
    tasks: Mapping[str, BenchmarkTaskMetadata],
    agents: Mapping[str, corral.Agent],
    environments: Mapping[str, corral.Environment],
    *,
    trials_per_task: int,
    limits: NaiveLimits,
    benchmark_id: str = "naive",
    order: str = "tasks",
) -> list[TrialRecord]:
    """Run every trial of every task; return their records (in completion order).

    ``order`` is the order the trials' tasks are created in, which is the order
    they queue on the first semaphore: ``"tasks"`` (all of one task's trials,
    then the next task's: the loop ``for task in tasks: for trial in range(k)``)
    or ``"rounds"`` (every task's trial 0, then every task's trial 1, ...).
    """
    if order not in ("rounds", "tasks"):
        raise ValueError(f"order must be 'rounds' or 'tasks', not {order!r}")

    def semaphore(value: int) -> anyio.Semaphore:
        # fast_acquire: an uncontended acquire does not yield, the leanest anyio allows.
        return anyio.Semaphore(value, fast_acquire=True)

    everything = semaphore(limits.max_parallel)
    evaluations = semaphore(limits.max_parallel_evaluations or limits.max_parallel)
    per_task = {task_id: semaphore(limits.max_parallel_per_task) for task_id in tasks}
    by_model = {m: semaphore(n) for m, n in limits.max_parallel_by_model.items()}
    by_env = {e: semaphore(n) for e, n in limits.max_parallel_by_environment.items()}
    records: list[TrialRecord] = []

    async def trial(task_id: str, meta: BenchmarkTaskMetadata, r: int) -> None:
        environment = environments[meta.environment_id]
        async with AsyncExitStack() as held:
            # One limit after another: the pattern that idles capacity.
            for sem in (
                everything,
                per_task[task_id],
                by_model.get(meta.model or ""),
                by_env.get(meta.environment_id),
            ):
                if sem is not None:
                    await held.enter_async_context(sem)
            record = await _execute(
                benchmark_id, task_id, meta, r, agents[meta.agent_id], environment
            )
        async with evaluations:
            evaluation = await environment.evaluate(record)
        records.append(
            TrialRecord(
                record.task_id,
                r,
                record.status,
                record.output,
                evaluation,
                commits=record.commits,
                started_at=record.started_at,
                finished_at=time.time(),
            )
        )

    if order == "rounds":
        trials = [(t, m, r) for r in range(trials_per_task) for t, m in tasks.items()]
    else:
        trials = [(t, m, r) for t, m in tasks.items() for r in range(trials_per_task)]
    async with anyio.create_task_group() as tg:
        for task_id, meta, r in trials:
            tg.start_soon(trial, task_id, meta, r)
    return records


async def _execute(
    benchmark_id: str,
    task_id: str,
    meta: BenchmarkTaskMetadata,
    r: int,
    agent: corral.Agent,
    environment: corral.Environment,
) -> TrialRecord:
    started = time.time()
    session = corral.AgentSession(
        benchmark_id=benchmark_id, task_id=task_id, trial=r, metadata=meta, inputs=meta.inputs
    )
    session.state = await environment.setup(session)
    steps = 0
    while session.iteration < meta.max_iterations:
        decision = await agent.act(session)
        if isinstance(decision, Final):
            return TrialRecord(
                task_id,
                r,
                TrialStatus.COMPLETED,
                decision.output,
                commits=steps + 2,
                started_at=started,
                state=session.state,
            )
        actions = [decision] if isinstance(decision, Action) else list(decision)
        state = session.state
        for action in actions:
            effect: ToolEffect = await environment.execute(action, session)
            if effect.state is not corral.UNCHANGED:
                state = effect.state
            session.steps.append(corral.Step(action, effect))
            steps += 2
        session.state = state
        session.iteration += 1
    return TrialRecord(
        task_id,
        r,
        TrialStatus.MAX_ITERATIONS,
        None,
        commits=steps + 2,
        started_at=started,
        state=session.state,
    )
