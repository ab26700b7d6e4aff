"""`AgentSession`: what agents and environments see of one trial."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .._checks import non_negative_int, non_negative_number
from .._errors import ConfigError
from .._tools import Tool
from .._types import NO_USAGE, BenchmarkTaskMetadata, Commit, Evaluation, Step, Usage


class AgentSession:
    """One trial's view for its agent and environment.

    Corral updates ``state``, ``steps``, ``history`` and ``iteration`` after
    every durable commit. ``scratch`` is the agent's own per-trial dict (it is
    not recorded). Inside ``Environment.execute``, ``step_key`` is the
    idempotency key of the action being executed: the same on every
    re-execution, in any process. ``tools`` are the `Tool` objects the
    environment declares (None when it declares none).
    """

    __slots__ = (
        "benchmark_id",
        "task_id",
        "trial",
        "attempt",
        "metadata",
        "model",
        "inputs",
        "state",
        "steps",
        "history",
        "iteration",
        "previous_evaluation",
        "previous_state",
        "previous_trial",
        "scratch",
        "step_key",
        "tools",
        "_usage",
    )

    def __init__(
        self,
        *,
        benchmark_id: str,
        task_id: str,
        trial: int,
        metadata: BenchmarkTaskMetadata,
        inputs: Mapping[str, Any],
        attempt: int = 0,
        previous_evaluation: Evaluation | None = None,
        previous_state: Any = None,
        previous_trial: int | None = None,
    ) -> None:
        self.benchmark_id = benchmark_id
        self.task_id = task_id
        self.trial = trial
        self.attempt = attempt
        # The target and metadata are the scorer's: an agent never sees them.
        if metadata.target is not None or metadata.metadata:
            metadata = dataclasses.replace(metadata, target=None, metadata={})
        self.metadata = metadata
        self.model = metadata.model
        self.inputs = inputs
        self.state: Any = None
        self.steps: list[Step] = []
        self.history: list[Commit] = []
        self.iteration = 0
        self.previous_evaluation = previous_evaluation
        self.previous_state = previous_state
        self.previous_trial = previous_trial
        self.scratch: dict[str, Any] = {}
        self.step_key: str | None = None
        #: The tools the environment declares for this trial (None: it declares none).
        self.tools: tuple[Tool, ...] | None = None
        self._usage: Usage = NO_USAGE

    def __repr__(self) -> str:
        return (
            f"AgentSession({self.benchmark_id!r}, task={self.task_id!r}, trial={self.trial}, "
            f"attempt={self.attempt}, iteration={self.iteration})"
        )

    def record_usage(
        self, *, input_tokens: int = 0, output_tokens: int = 0, cost: float = 0.0
    ) -> None:
        """Add token and cost usage to the step being recorded (summed in the report).

        A step's tokens may add up to at most `MAX_TOKENS` each and its cost to at
        most `MAX_COST`; more is refused (`ConfigError` naming the value) and not added.
        """
        for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            non_negative_int(name, value)
        cost = non_negative_number("cost", cost)
        self._usage = add_usage(self._usage, Usage(input_tokens, output_tokens, float(cost)))

    def take_usage(self) -> Usage:
        """The usage recorded since the last commit, which the next commit carries."""
        usage, self._usage = self._usage, NO_USAGE
        return usage

    def for_action(self, step_key: str) -> AgentSession:
        """A view for executing one action: its own ``step_key`` and usage, same trial."""
        view = object.__new__(AgentSession)
        for name in AgentSession.__slots__:
            setattr(view, name, getattr(self, name))
        view.step_key = step_key
        view._usage = NO_USAGE
        return view


#: The most tokens of each kind one step may record: the stores keep them as 64-bit
#: integers (SQLite INTEGER, PostgreSQL bigint).
MAX_TOKENS = 2**63 - 1
#: The most cost one step may record: far beyond any real bill, and small enough that
#: no sum over a run's steps overflows to infinity (which JSON cannot write).
MAX_COST = 1e15


def add_usage(total: Usage, more: Usage) -> Usage:
    """``total + more``, the usage of one step, or a `ConfigError` naming the part
    that a store cannot hold."""
    out = total + more
    for name, value, bound in (
        ("input_tokens", out.input_tokens, MAX_TOKENS),
        ("output_tokens", out.output_tokens, MAX_TOKENS),
        ("cost", out.cost, MAX_COST),
    ):
        if value > bound:
            added = f" (with {getattr(total, name)!r} recorded before)" if total else ""
            raise ConfigError(
                f"{name} {value!r}{added} is out of bounds: one step records at most {bound!r}"
            )
    return out
