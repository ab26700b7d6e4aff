"""Running totals of one run's commits: constant work per commit, read when rendering."""

from __future__ import annotations

from .._records import evaluation_of
from .._types import EVALUATED_STATUSES, Commit, TrialStatus

#: Terminal statuses after which a trial is finished without an evaluation.
_UNSCORED = frozenset(str(s) for s in TrialStatus if s not in EVALUATED_STATUSES)


class Tally:
    """What this run's commits say so far: passes, failures, retries, usage.

    `add` is on the hot path (every durable commit of every trial), so it does
    a few dictionary lookups and integer additions and nothing else.
    """

    __slots__ = (
        "commits",
        "actions",
        "passed",
        "scored",
        "evaluation_failures",
        "statuses",
        "unscored",
        "retried",
        "input_tokens",
        "output_tokens",
        "cost",
    )

    def __init__(self) -> None:
        self.commits = 0
        self.actions = 0
        self.passed = 0
        self.scored = 0
        self.evaluation_failures = 0
        self.statuses: dict[str, int] = {}
        self.unscored = 0  # trials that ended error/unreachable: finished, not passed
        self.retried = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0

    def add(self, commit: Commit) -> None:
        self.commits += 1
        usage = commit.usage
        if usage:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cost += usage.cost
        kind = commit.kind
        if kind == "action":
            self.actions += 1
        elif kind == "terminal":
            payload = commit.payload
            status = str(payload.get("status"))
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status in _UNSCORED:
                self.unscored += 1
            if payload.get("attempts", 1) > 1:
                self.retried += 1
        elif kind == "evaluation":
            evaluation = evaluation_of(commit.payload)
            if evaluation is None:
                self.evaluation_failures += 1
            else:
                self.scored += 1
                self.passed += evaluation.passed

    @property
    def finished(self) -> int:
        """Trials this run finished: evaluated (or failed to be), or ended unscored."""
        return self.scored + self.evaluation_failures + self.unscored

    @property
    def errors(self) -> int:
        """Trials that ended ``error`` plus evaluations that failed."""
        return self.statuses.get(str(TrialStatus.ERROR), 0) + self.evaluation_failures

    @property
    def pass_rate(self) -> float | None:
        """pass@1 over the trials this run finished (unscored ones count as failed)."""
        finished = self.finished
        return self.passed / finished if finished else None
