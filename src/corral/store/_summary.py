"""Folding one trial's commits into a `TrialSummary` (shared by every backend)."""

from __future__ import annotations

from .._types import NO_USAGE, Commit, Usage
from ._protocol import TrialSummary


class SummaryBuilder:
    """Accumulates a trial's commits in seq order; ``build()`` gives its summary."""

    __slots__ = (
        "task_id",
        "trial",
        "commits",
        "started_at",
        "usage",
        "terminal",
        "evaluation",
        "last_seq",
    )

    def __init__(self, task_id: str, trial: int) -> None:
        self.task_id = task_id
        self.trial = trial
        self.commits = 0
        self.started_at = 0.0
        self.usage: Usage = NO_USAGE
        self.terminal: Commit | None = None
        self.evaluation: Commit | None = None
        self.last_seq = -1

    def add(self, commit: Commit) -> None:
        self.last_seq = commit.seq
        if commit.kind == "reopen":
            # A fresh attempt: the summary describes what follows (as `Projection`
            # does), but for usage: every attempt's spend counts.
            self.commits = 0
            self.terminal = self.evaluation = None
        if not self.commits:
            self.started_at = commit.created_at
        self.commits += 1
        if commit.usage:
            self.usage = self.usage + commit.usage
        if commit.kind == "terminal":
            self.terminal = commit
        elif commit.kind == "evaluation":
            self.evaluation = commit

    def build(self) -> TrialSummary:
        return TrialSummary(
            task_id=self.task_id,
            trial=self.trial,
            commits=self.commits,
            started_at=self.started_at,
            usage=self.usage,
            terminal=self.terminal,
            evaluation=self.evaluation,
            next_seq=self.last_seq + 1,
        )
