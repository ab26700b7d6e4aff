"""Trial records from terminal and evaluation commits: the one place that reads them."""

from __future__ import annotations

from typing import Any

from ._types import Commit, Evaluation, TrialRecord, TrialStatus, Usage


def evaluation_of(payload: Any) -> Evaluation | None:
    """The `Evaluation` an evaluation commit records, or None if scoring failed."""
    if not isinstance(payload, dict) or "passed" not in payload:
        return None
    return Evaluation(payload["score"], payload["passed"], payload.get("details", {}))


def record_of(
    task_id: str,
    trial: int,
    *,
    terminal: Commit,
    evaluation: Commit | None,
    commits: int,
    started_at: float,
    usage: Usage,
    keep_state: bool = True,
) -> TrialRecord:
    payload = terminal.payload
    record = TrialRecord(
        task_id=task_id,
        trial=trial,
        status=TrialStatus(payload["status"]),
        output=payload.get("output"),
        error=payload.get("error"),
        attempts=payload.get("attempts", 1),
        commits=commits - (evaluation is not None),
        started_at=started_at,
        finished_at=terminal.created_at,
        usage=usage,
        state=payload.get("state") if keep_state else None,
    )
    return record if evaluation is None else with_evaluation(record, evaluation)


def with_evaluation(record: TrialRecord, commit: Commit) -> TrialRecord:
    """``record`` once its evaluation commit exists."""
    evaluation = evaluation_of(commit.payload)
    error = record.error
    if evaluation is None:
        error = f"evaluation failed: {commit.payload.get('error')}"
    return TrialRecord(
        task_id=record.task_id,
        trial=record.trial,
        status=record.status,
        output=record.output,
        evaluation=evaluation,
        error=error,
        attempts=record.attempts,
        commits=record.commits + 1,
        started_at=record.started_at,
        finished_at=commit.created_at,
        usage=record.usage + commit.usage if commit.usage else record.usage,
        state=record.state,
    )


def without_state(record: TrialRecord) -> TrialRecord:
    """``record`` without its final state (a report keeps no states)."""
    if record.state is None:
        return record
    return TrialRecord(
        task_id=record.task_id,
        trial=record.trial,
        status=record.status,
        output=record.output,
        evaluation=record.evaluation,
        error=record.error,
        attempts=record.attempts,
        commits=record.commits,
        started_at=record.started_at,
        finished_at=record.finished_at,
        usage=record.usage,
    )
