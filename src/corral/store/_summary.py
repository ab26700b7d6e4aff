"""Folding one trial's commits into a `TrialSummary` (shared by every backend)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from .._types import Commit
from ..history import TrialFold
from ._decode import corrupt, decode_commit, missing_commit
from ._protocol import TrialKey, TrialSummary


def summary_of(task_id: str, trial: int, fold: TrialFold) -> TrialSummary:
    """The `TrialSummary` a trial's fold describes."""
    standing = None
    if fold.standing is not None:
        terminal, evaluation, commits, started_at = fold.standing
        # As of the latest reopen: the new attempt's work changes no head (`OpenFolds`).
        # Or of a rescore of it since (its evaluation, after the reopen): the head moves
        # on with it, as `HeadStore.heads_written` says of every head written again.
        at = fold.reopen_seq if evaluation is None else max(fold.reopen_seq, evaluation.seq)
        standing = TrialSummary(
            task_id, trial, commits, started_at, fold.earlier_usage, terminal, evaluation, at + 1
        )
    return TrialSummary(
        task_id=task_id,
        trial=trial,
        commits=fold.commits,
        started_at=fold.started_at,
        usage=fold.spend,
        terminal=fold.terminal,
        evaluation=fold.evaluation,
        next_seq=fold.next_seq,
        standing=standing,
    )


class SummaryBuilder:
    """Accumulates a trial's commits in seq order (the history's one fold);
    ``build()`` gives its summary."""

    __slots__ = ("task_id", "trial", "fold")

    def __init__(self, task_id: str, trial: int) -> None:
        self.task_id = task_id
        self.trial = trial
        self.fold = TrialFold()

    def add(self, commit: Commit) -> None:
        self.fold.apply(commit)

    def build(self) -> TrialSummary:
        return summary_of(self.task_id, self.trial, self.fold)


class RowFolder:
    """Folds ``benchmark_id``'s scan rows ``(task_id, trial, seq, kind, payload,
    created_at, input_tokens, output_tokens, cost)``, in key order and in chunks, into
    trial summaries; ``where`` names the store in a `StoreCorrupt` (a row that cannot
    be read, or a trial whose seqs skip one)."""

    __slots__ = ("_builder", "_where", "_benchmark_id")

    def __init__(self, where: str, benchmark_id: str) -> None:
        self._builder: SummaryBuilder | None = None
        self._where = where
        self._benchmark_id = benchmark_id

    def fold(self, rows: Iterable[Sequence[Any]]) -> list[TrialSummary]:
        """The summaries of the trials these rows complete (the last one stays open)."""
        out = []
        builder = self._builder
        where, benchmark_id = self._where, self._benchmark_id
        for row in rows:
            task_id, trial = row[0], row[1]
            commit = decode_commit(where, benchmark_id, task_id, trial, row[2:])
            if builder is None or builder.trial != trial or builder.task_id != task_id:
                if builder is not None:
                    out.append(builder.build())
                builder = self._builder = SummaryBuilder(task_id, trial)
            fold = builder.fold
            if commit.seq != fold.last_seq + 1:  # seqs go 0, 1, 2...: one was deleted
                missing = fold.last_seq + 1
                raise missing_commit(where, benchmark_id, task_id, trial, missing, commit.seq)
            fold.apply(commit)
        return out

    def rest(self) -> list[TrialSummary]:
        """The last trial's summary, once every row has been folded."""
        return [] if self._builder is None else [self._builder.build()]


def check_heads_met(
    where: str,
    benchmark_id: str,
    heads: Iterable[Sequence[Any]],
    summaries: Sequence[TrialSummary],
) -> None:
    """`check_head_met` for each of ``heads`` ``(task_id, trial, next_seq)`` against
    its trial's commits in ``summaries`` (read by `RowFolder` after the heads, so
    numbered 0, 1, 2...; a trial with none has no summary)."""
    found = {(s.task_id, s.trial): s.next_seq for s in summaries}
    for task_id, trial, next_seq in heads:
        has = found.get((task_id, trial), 0)
        check_head_met(where, benchmark_id, task_id, trial, has, next_seq)


def check_head_met(
    where: str, benchmark_id: str, task_id: str, trial: int, has: int, next_seq: Any
) -> None:
    """Raise `StoreCorrupt` if a trial has fewer commits (``has``, numbered 0, 1, 2...)
    than its head was made from (``next_seq``, the head read before the commits). A
    head is written in the transaction of the commits it was made from, and Corral
    never deletes a commit: read first, a head can only be behind them (a live writer
    appending meanwhile), never ahead. Ahead, the commits it counted were deleted
    behind Corral's back, and a report would count the trial as its head says beside
    a record (a history) that says otherwise."""
    if type(next_seq) is int and has < next_seq:  # another type: `decode_head` says so
        what = (
            f"task {task_id!r} trial {trial} has {has} commits, "
            f"though its head was made from {next_seq}"
        )
        raise corrupt(where, benchmark_id, what)


def checked_history(
    where: str, key: TrialKey, commits: list[Commit], heads: Iterable[Sequence[Any]]
) -> list[Commit]:
    """``commits``, a trial's history, once checked against ``heads`` (its head's
    ``next_seq`` in a row, read before the history; none: the store keeps no head)."""
    for (next_seq,) in heads:
        check_head_met(where, *key, len(commits), next_seq)
    return commits
