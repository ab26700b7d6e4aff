"""A trial's record read back from its commits (`TrialSummary.record`)."""

from __future__ import annotations

from corral._types import Commit, TrialStatus, Usage
from corral.history import EvaluationPayload, TrialFold, encode, terminal
from corral.store._summary import summary_of


def test_a_scored_trials_usage_counts_its_evaluation_once() -> None:
    ran, scored = Usage(100, 10, 0.5), Usage(40, 8, 0.25)
    commits = [
        Commit(
            0, "terminal", encode(terminal(TrialStatus.COMPLETED, output="x", attempts=1)), 1.0, ran
        ),
        Commit(1, "evaluation", encode(EvaluationPayload(1.0, True)), 2.0, scored),
    ]
    summary = summary_of("t", 0, TrialFold.of(commits))
    assert summary.usage == ran + scored
    assert summary.record().usage == ran + scored
    assert summary.record().passed
    # The record its scorer is given: the trial as it ended, its spend so far.
    assert summary.record(scored=False).usage == ran + scored
