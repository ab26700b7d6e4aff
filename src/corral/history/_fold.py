"""The one fold of a trial's commits, in seq order, and the views derived from it.

A ``reopen`` commit starts the trial's latest attempt: the fold then describes what
follows it (its commits, terminal, evaluation, usage, failed attempts), but for
`spend`, which counts every attempt. A trial is `finished` (as the store sees it)
with a terminal after its latest reopen, and `finished_and_scored` (as a report and
a resume see it) once that terminal is also scored if its status is scored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Self

from .._types import EVALUATED_STATUSES, NO_USAGE, Commit, Usage
from ._codec import failed_attempts_of, status_of
from ._kinds import CommitKind

_REOPEN = CommitKind.REOPEN
_TERMINAL = CommitKind.TERMINAL
_EVALUATION = CommitKind.EVALUATION


class TrialFold:
    """A trial's commits folded one by one (`apply`); each view is read at any time."""

    __slots__ = (
        "commits",
        "started_at",
        "usage",
        "earlier_usage",
        "terminal",
        "evaluation",
        "last_seq",
        "failed_attempts",
    )

    def __init__(self) -> None:
        #: How many commits the latest attempt has (the reopen marker included).
        self.commits = 0
        #: When the latest attempt's first commit was made.
        self.started_at = 0.0
        #: Usage since the latest ``reopen`` (what budgets count).
        self.usage: Usage = NO_USAGE
        #: Usage of the attempts before the latest ``reopen``.
        self.earlier_usage: Usage = NO_USAGE
        self.terminal: Commit | None = None
        #: The latest evaluation (a rescore appends another: the latest counts).
        self.evaluation: Commit | None = None
        self.last_seq = -1
        #: The errors of the attempts that failed and were retried (since the latest reopen).
        self.failed_attempts: Sequence[Mapping[str, Any]] = ()

    @classmethod
    def of(cls, commits: Sequence[Commit]) -> Self:
        fold = cls()
        for commit in commits:
            fold.apply(commit)
        return fold

    def apply(self, commit: Commit) -> None:
        self.last_seq = commit.seq
        kind = commit.kind
        if kind == _REOPEN:
            if self.usage:
                self.earlier_usage = self.earlier_usage + self.usage
            self.usage = NO_USAGE
            self.commits = 0
            self.terminal = self.evaluation = None
            self.failed_attempts = ()
        if not self.commits:
            self.started_at = commit.created_at
        self.commits += 1
        usage = commit.usage
        if usage is not NO_USAGE and usage:
            self.usage = self.usage + usage
        if kind == _TERMINAL:
            self.terminal = commit
        elif kind == _EVALUATION:
            self.evaluation = commit
        if type(commit.payload) is dict and "failed_attempts" in commit.payload:
            failed = failed_attempts_of(commit)
            if failed:  # each such commit carries all so far
                self.failed_attempts = failed

    @property
    def next_seq(self) -> int:
        """The sequence number the trial's next commit takes."""
        return self.last_seq + 1

    @property
    def spend(self) -> Usage:
        """Usage of every attempt (a reopened trial's earlier spend still counts)."""
        return self.usage + self.earlier_usage if self.earlier_usage else self.usage

    @property
    def finished(self) -> bool:
        """The store's meaning: a terminal commit after the latest reopen."""
        return self.terminal is not None

    @property
    def finished_and_scored(self) -> bool:
        """The report's (and a resume's) meaning: see `finished_and_scored`."""
        return finished_and_scored(self.terminal, self.evaluation)


def finished_and_scored(terminal: Commit | None, evaluation: Commit | None) -> bool:
    """What a resume leaves alone: a terminal commit and, if its status is scored, an
    evaluation (a trial still to be scored is evaluated by the next run)."""
    if terminal is None:
        return False
    return evaluation is not None or status_of(terminal) not in EVALUATED_STATUSES


def latest_attempt(commits: list[Commit]) -> list[Commit]:
    """The commits after the last ``reopen`` marker: the attempt the report uses."""
    for i in range(len(commits) - 1, -1, -1):
        if commits[i].kind == _REOPEN:
            return commits[i + 1 :]
    return commits


def last_of_kind(commits: Sequence[Commit], kind: str) -> Commit | None:
    """The latest commit of ``kind`` (a rescore appends evaluations: the last one counts)."""
    return next((c for c in reversed(commits) if c.kind == kind), None)
