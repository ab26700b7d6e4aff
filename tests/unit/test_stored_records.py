"""A trial's record read back from its commits (`TrialSummary.record`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from corral._types import NO_USAGE, Commit, TrialStatus, Usage
from corral.history import EvaluationPayload, TrialFold, encode, terminal
from corral.report._lazy import StoreRecords
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


class _Reader:
    """A store to read records from: one finished trial per task, reads counted."""

    def __init__(self) -> None:
        self.reads: list[list[str]] = []

    @asynccontextmanager
    async def opened(self) -> AsyncIterator[None]:
        yield

    async def task_summaries(self, benchmark_id: str, task_ids: list[str]) -> list[Any]:
        self.reads.append(list(task_ids))
        done = encode(terminal(TrialStatus.COMPLETED, output="x", attempts=1))
        scored = encode(EvaluationPayload(1.0, True))
        commits = [Commit(0, "terminal", done, 1.0), Commit(1, "evaluation", scored, 2.0)]
        return [summary_of(t, 0, TrialFold.of(commits)) for t in task_ids]


def test_records_read_in_report_order_a_window_at_a_time() -> None:
    order = [f"t{i}" for i in range(7)]
    reader = _Reader()
    source = StoreRecords(lambda: reader, "b", 1, lambda: order)
    source.WINDOW = 3
    assert [source.task_records(t)[0].task_id for t in order] == order
    assert reader.reads == [order[0:3], order[3:6], order[6:7]]
    assert not source._positions.indexed  # in order: no index of every task's position
    # Out of order: each from its own window on.
    assert source.task_records("t4")[0].task_id == "t4"
    assert source.task_records("t1")[0].task_id == "t1"
    assert reader.reads[-2:] == [order[4:7], order[1:4]]


def test_a_window_holds_about_window_trials_whatever_the_trials_per_task() -> None:
    order = [f"t{i}" for i in range(7)]
    reader = _Reader()
    source = StoreRecords(lambda: reader, "b", 2, lambda: order)
    source.WINDOW = 4  # trials: two tasks of two trials (4 tasks read 8 records)
    for t in order:
        source.task_records(t)
    assert reader.reads == [order[0:2], order[2:4], order[4:6], order[6:7]]


def test_a_record_built_slot_by_slot_is_the_dataclasss_own() -> None:
    """`_record` skips TrialRecord's frozen __init__ for speed: it must build the same
    frozen object, field for field, and refuse a missing field."""
    import dataclasses

    import pytest

    from corral import TrialRecord
    from corral._records import _record

    values = [f"v{i}" for i in range(len(dataclasses.fields(TrialRecord)))]
    built = _record(*values)
    assert type(built) is TrialRecord and built == TrialRecord(*values)
    assert hash(built) == hash(TrialRecord(*values))
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.trial = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        _record(*values[:-1])


def test_a_commit_built_slot_by_slot_is_the_dataclasss_own() -> None:
    """`new_commit` skips Commit's frozen __init__ for speed: it must build the same
    frozen object, field for field."""
    import dataclasses

    import pytest

    from corral._types import new_commit

    usage = Usage(1, 2, 0.5)
    built, own = (
        new_commit(3, "action", {"a": 1}, 1.5, usage),
        Commit(3, "action", {"a": 1}, 1.5, usage),
    )
    assert type(built) is Commit and built == own
    assert [getattr(built, f.name) for f in dataclasses.fields(Commit)] == [
        3,
        "action",
        {"a": 1},
        1.5,
        usage,
    ]
    assert new_commit(0, "setup", None, 0.0, NO_USAGE) == Commit(0, "setup", None, 0.0)
    with pytest.raises(TypeError):  # every field is given
        new_commit(0, "setup", None, 0.0)  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.seq = 4  # type: ignore[misc]


def test_a_previous_built_slot_by_slot_is_the_dataclasss_own() -> None:
    """`new_previous` skips Previous's frozen __init__ for speed (the run keeps one per
    finished trial a later one follows): it must build the same frozen object."""
    import dataclasses

    import pytest

    from corral._types import Evaluation
    from corral.runtime._jobs import Previous, new_previous

    evaluation = Evaluation(score=1.0, passed=True)
    built = new_previous(2, evaluation, {"s": 1}, "completed")
    assert type(built) is Previous and built == Previous(2, evaluation, {"s": 1}, "completed")
    assert new_previous(0, None, None, None) == Previous(0, None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.trial = 3  # type: ignore[misc]


def test_a_projections_steps_are_the_dataclasses_own() -> None:
    """The projection builds its actions, effects and steps slot by slot for speed:
    from typed payloads or decoded ones, they are the values their ``__init__`` makes."""
    from corral._types import UNCHANGED, Action, Step, ToolEffect
    from corral.history import ActionPayload, SetupPayload, ToolEffectPayload
    from corral.runtime._projection import Projection

    payloads = [
        ("setup", SetupPayload(state=0)),
        ("action", ActionPayload("step", {"n": 1}, 0, 0)),
        ("tool_effect", ToolEffectPayload(1, "ok", 5)),
        ("action", ActionPayload("look", {}, 1, 0)),
        ("tool_effect", ToolEffectPayload(3, {"seen": [1]})),
    ]
    commits = [Commit(seq, kind, encode(p), 0.0) for seq, (kind, p) in enumerate(payloads)]
    expected = [
        Step(Action("step", {"n": 1}), ToolEffect("ok", 5)),
        Step(Action("look", {}), ToolEffect({"seen": [1]}, UNCHANGED)),
    ]
    for typed in (True, False):
        projection = Projection()
        for commit, (_, payload) in zip(commits, payloads, strict=True):
            projection.apply(commit, payload if typed else None)
        assert projection.steps == expected and projection.state == 5
        for step in projection.steps:
            assert type(step) is Step and type(step.action) is Action
            assert type(step.effect) is ToolEffect


def test_equal_evaluations_made_for_records_are_one_shared_object() -> None:
    """`TrialTable.evaluation` keeps what it makes: equal evaluations of later trials
    are that one object (records spooled are never added to the table), one with
    details or usage is its own, and a record added with a shared one keeps it."""
    from corral._records import TrialTable
    from corral._types import Evaluation, TrialRecord

    table = TrialTable(2)
    first = table.evaluation(1.0, True, {})
    assert first == Evaluation(1.0, True) and table.evaluation(1.0, True, {}) is first
    assert table.evaluation(1, True, {}) is not first  # 1 and 1.0: different JSON
    assert table.evaluation(1.0, True, {"why": "x"}) is not table.evaluation(
        1.0, True, {"why": "x"}
    )
    spent = Usage(1, 1, 0.0)
    assert table.evaluation(1.0, True, {}, usage=spent).usage == spent
    record = TrialRecord("t", 0, TrialStatus.COMPLETED, evaluation=first)
    table.add(record)
    assert table[("t", 0)].evaluation is first


@pytest.mark.anyio
async def test_a_reflective_agent_editing_the_scores_it_is_shown_changes_no_other_tasks() -> None:
    """Equal evaluations of a run's trials are one shared object, and a reflective
    session is shown its previous trial's: one whose named scores (a dict) an agent
    edited was what the next task's session was shown as its own previous trial's."""
    from corral import BenchmarkTaskMetadata, CorralRunner, Evaluation, Final, MemoryStore
    from corral.testing import FakeEnvironment

    seen: dict[str, dict[str, float]] = {}

    class EditsItsFeedback:
        async def act(self, session: Any) -> Final:
            shown = session.previous_evaluation
            if shown is not None:
                seen[session.task_id] = dict(shown.scores)
                shown.scores["acc"] = 0.0  # the agent's own notes on it
            return Final("x")

    runner = CorralRunner(
        {task: BenchmarkTaskMetadata("a", "e") for task in ("a", "b")},
        {"a": EditsItsFeedback()},
        {"e": FakeEnvironment(evaluate=lambda record: Evaluation(1.0, True, scores={"acc": 1.0}))},
        store=MemoryStore(),
    )
    await runner.run("r", trials_per_task=2, max_parallel=1)
    assert seen == {"a": {"acc": 1.0}, "b": {"acc": 1.0}}
