"""What `CorralRunner.run` does with an executor: checks before anything runs, then the
`Remote` that runs the admitted work on the executor's hosts."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import anyio.to_thread

from .._errors import ConfigError
from .._protocols import Agent, Environment
from ..runtime._retry import RetryPolicy
from ..scheduler._limits import Limits
from ..store._protocol import CommitStore
from ._dispatch import RayRemote
from ._host import HostSpec
from ._ray import RayExecutor
from ._stores import check_reach, check_store, spec_of


async def check_executor(
    executor: object,
    store: CommitStore,
    agents: Mapping[str, Agent],
    environments: Mapping[str, Environment],
    limits: Limits,
) -> Limits:
    """Refuse (`ConfigError`) what hosts could not run, before anything runs or is written;
    return ``limits`` with the hosts' capacity as an upper bound on the total."""
    if not isinstance(executor, RayExecutor):
        raise ConfigError(f"executor must be a RayExecutor or None, not {executor!r}")
    executor.check_picklable({"agent": agents, "environment": environments})
    check_store(store)  # before Ray starts: nothing to connect to for a store it cannot use
    all_local = await anyio.to_thread.run_sync(executor.connect)
    check_reach(store, all_local=all_local)
    capacity = executor.capacity
    if capacity is not None and capacity < limits.max_parallel_total:
        limits = dataclasses.replace(limits, max_parallel_total=capacity)
    return limits


def remote_for(
    executor: RayExecutor,
    benchmark_id: str,
    *,
    store: CommitStore,
    agents: Mapping[str, Agent],
    environments: Mapping[str, Environment],
    policy: RetryPolicy,
    trial_timeout: float | None,
    evaluation_timeout: float | None,
    max_backlog: int,
    max_value_bytes: int,
    notify: bool,
) -> RayRemote:
    """The run's hosts-to-be, once the coordinator holds the benchmark's claim."""
    spec = HostSpec(
        benchmark_id=benchmark_id,
        agents=agents,
        environments=environments,
        store=spec_of(store, benchmark_id),
        policy=policy,
        trial_timeout=trial_timeout,
        evaluation_timeout=evaluation_timeout,
        max_backlog=max_backlog,
        max_value_bytes=max_value_bytes,
        notify=notify,
        scope_hub="",
    )
    return RayRemote(executor, spec)
