"""The executor seam: where admitted work runs, and how its results come back.

Admission stays in the run loop, so the limits are exact whatever runs the
work: the loop submits each admitted job (`TrialJob`, `EvalJob`) to the run's
`Execution` and reacts to the typed results (`Executed`, `Postponed`,
`Evaluated`) the execution delivers. An `Executor` is the reusable setting a
user passes (``run(..., executor=...)``); it makes one `Execution` per run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .._concurrency import ConcurrencyScopes, ScopeStatistics
    from .._protocols import Agent, Environment
    from .._types import Evaluation
    from ..runtime._acks import Acks
    from ..runtime._jobs import Job, Result
    from ..runtime._retry import RetryPolicy
    from ..store._protocol import CommitStore

#: Receives a batch of results (on the run's event loop, never from another thread);
#: the run loop admits what they free once per batch.
Deliver = Callable[["Sequence[Result]"], None]


@dataclass(frozen=True, slots=True)
class Work:
    """What every job of one run is run with, wherever it runs (picklable, but for
    agents and environments that are not)."""

    benchmark_id: str
    agents: Mapping[str, Agent]
    environments: Mapping[str, Environment]
    policy: RetryPolicy
    trial_timeout: float | None
    evaluation_timeout: float | None
    max_backlog: int
    max_value_bytes: int
    #: Whether anyone (observers, a run_cost_limit) hears of durable commits.
    observed: bool = False
    #: The bound of `corral.subprocess` calls at once, where they run (a Ray host keeps
    #: its own: None is its CPUs).
    max_subprocesses: int | None = None


@dataclass(frozen=True, slots=True)
class RunContext:
    """What the run loop gives an executor to start one run's `Execution` with: the
    run's `Work` and ``store`` (whose benchmark claim the run holds), its
    acknowledgements (``acks``: what its observers hear), where results go
    (``deliver``), ``evaluation``, which makes the `Evaluation` of a result that
    crosses a process (shared between equal ones), and its named ``scopes``."""

    work: Work
    store: CommitStore
    acks: Acks
    deliver: Deliver
    evaluation: Callable[..., Evaluation]
    scopes: ConcurrencyScopes


def keeps_scopes_elsewhere(executor: Executor) -> bool:
    """Whether ``executor``'s workers keep a run's named scopes outside this process
    (its class says so with ``scopes_elsewhere = True``, as `RayExecutor`'s does: its
    hosts share them in a scope hub), where a run in this process cannot share them."""
    return getattr(executor, "scopes_elsewhere", False) is True


@runtime_checkable
class Executor(Protocol):
    """Where a run's admitted trials and evaluations run (`LocalExecutor`,
    `RayExecutor`). The run loop keeps admission; an executor runs what it is handed.
    """

    async def prepare(self, work: Work, store: CommitStore) -> int | None:
        """Before anything runs or is written: refuse (`ConfigError`) what it could not
        run; return how many jobs it runs at once (None: no bound of its own)."""
        ...

    def start(self, run: RunContext) -> Execution:
        """The run's execution, once the run holds the benchmark's claim on its store."""
        ...


class Execution(Protocol):
    """One run's execution: jobs in (`submit_all`), results out (the ``deliver`` it was
    made with), between `start` and `close`."""

    @property
    def busy(self) -> int:
        """Jobs submitted whose result has not been delivered yet."""
        ...

    def submit_all(self, jobs: Sequence[Job]) -> None:
        """Take the jobs one admission gave (perhaps none: called after every admission)
        and send them on."""
        ...

    def close(self) -> None:
        """Nothing more will be submitted (and nothing is busy): its tasks end."""
        ...

    def start(self, tg: TaskGroup) -> None:
        """Start taking jobs, its tasks in ``tg`` (the run loop's), until `close`. Once
        ``tg`` is cancelled, nothing handed to it runs any more. A job's failure (the
        store's, say) is raised in ``tg`` and fails the run."""
        ...

    def dropped(self) -> Sequence[Job]:
        """Jobs taken that never ran because the run was cancelled first (a cancelled
        run lands what a rate-limited trial's job carried)."""
        ...

    def scope_statistics(self) -> Mapping[str, ScopeStatistics]:
        """The named concurrency scopes its workers share elsewhere (a Ray host's), for
        observers; empty when they are this process's own."""
        ...
