"""Running totals of one run's commits: constant work per commit, read when rendering."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .. import history
from .._types import EVALUATED_STATUSES, Commit, TrialRecord, TrialStatus
from ..store._protocol import TrialKey

#: Terminal statuses after which a trial is finished without an evaluation.
_UNSCORED = frozenset(str(s) for s in TrialStatus if s not in EVALUATED_STATUSES)


class LaneTally:
    """One key's share under a keyed execution limit (a model, an environment):
    passes, finished trials, and the execution time of those this run saw start
    and end (for the ETA)."""

    __slots__ = ("passed", "finished", "busy", "timed")

    def __init__(self) -> None:
        self.passed = 0
        self.finished = 0
        self.busy = 0.0
        self.timed = 0

    @property
    def mean_duration(self) -> float | None:
        return self.busy / self.timed if self.timed else None

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.finished if self.finished else None


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
        "resumed",
        "resumed_passed",
        "limits",
        "by_limit",
        "overall",
        "_lanes",
        "_names",
        "_started",
    )

    def __init__(
        self,
        lanes: Mapping[str, tuple[str | None, ...]] | None = None,
        names: Sequence[str] = ("by_model", "by_environment"),
    ) -> None:
        """``lanes`` maps a task id to its key under each keyed execution limit, in
        the order of ``names`` (their `KeyedLimit.statistics`; None: no key): what
        the per-model pass@1 and the ETA's lanes are counted by. Commits added
        without a key, or of an unknown task, count only in the totals."""
        self.commits = 0
        self.actions = 0
        self.passed = 0
        self.scored = 0
        self.evaluation_failures = 0
        self.statuses: dict[str, int] = {}
        self.unscored = 0  # trials that ended error/unreachable: finished, not passed
        #: Attempts retried after an exception (`BenchmarkReport.retries`, summed).
        self.retried = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = 0.0
        #: Trials an earlier run finished (and how many of them passed, when known).
        self.resumed = 0
        self.resumed_passed = 0
        #: Trials this run ended ``limit``, by the budget that ended them.
        self.limits: dict[str, int] = {}
        #: Per keyed execution limit (by statistics name), each key's share.
        self.by_limit: dict[str, dict[str, LaneTally]] = {name: {} for name in names}
        self.overall = LaneTally()
        self._lanes = lanes or {}
        self._names = tuple(names)
        self._started: dict[TrialKey, float] = {}  # trials running now: bounded by the limits

    def resume(self, count: int, records: Iterable[TrialRecord]) -> None:
        """Count the ``count`` trials an earlier run finished (``records``): their
        passes count in pass@1 so far too, by model."""
        self.resumed = count
        self.resumed_passed = 0
        for record in records:
            self.resumed_passed += record.passed
            for lane in self._lanes_of(record.task_id):
                lane.finished += 1
                lane.passed += record.passed

    def _lanes_of(self, task_id: str) -> tuple[LaneTally, ...]:
        where = self._lanes.get(task_id)
        if where is None:
            return ()
        out = []
        for name, key in zip(self._names, where, strict=True):
            if key is None:
                continue
            of_limit = self.by_limit[name]
            lane = of_limit.get(key)
            if lane is None:
                lane = of_limit[key] = LaneTally()
            out.append(lane)
        return tuple(out)

    @property
    def models(self) -> dict[str, LaneTally]:
        """Each model's share (empty if the run has no model limit)."""
        return self.by_limit.get("by_model", {})

    def add(self, commit: Commit, key: TrialKey | None = None) -> None:
        self.commits += 1
        usage = commit.usage
        if usage:
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cost += usage.cost
        kind = commit.kind
        if kind == "action":
            self.actions += 1
        elif kind == "setup":
            if key is not None:
                self._started[key] = commit.created_at
        elif kind == "terminal":
            payload = history.terminal_of(commit)
            status = str(payload.status)
            self.statuses[status] = self.statuses.get(status, 0) + 1
            lanes = () if key is None else self._lanes_of(key.task_id)
            # A trial resumed mid-way has no setup in this run: no duration to learn.
            started = None if key is None else self._started.pop(key, None)
            if started is not None:
                took = max(0.0, commit.created_at - started)
                for lane in (self.overall, *lanes):
                    lane.busy += took
                    lane.timed += 1
            if status in _UNSCORED:
                self.unscored += 1
                for lane in lanes:
                    lane.finished += 1
            if payload.attempts > 1:
                # Failed attempts given another, as the report's `retries` counts them.
                self.retried += payload.attempts - 1
            limit = payload.limit
            if limit is not None:
                self.limits[limit] = self.limits.get(limit, 0) + 1
        elif kind == "evaluation":
            scored = history.evaluation_of(commit)
            evaluation = scored.evaluation
            passed = (
                evaluation is not None
                and bool(evaluation.passed)
                # A trial that overran its budget is scored but never passes.
                and scored.trial_status != "limit"
            )
            if evaluation is None:
                self.evaluation_failures += 1
            else:
                self.scored += 1
                self.passed += passed
            if key is not None:
                for lane in self._lanes_of(key.task_id):
                    lane.finished += 1
                    lane.passed += passed

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
        """pass@1 so far: over this run's finished trials and the resumed ones
        (unscored trials count as failed)."""
        passed, finished = self.pass_counts
        return passed / finished if finished else None

    @property
    def pass_counts(self) -> tuple[int, int]:
        """(passed, finished) behind `pass_rate`."""
        return self.passed + self.resumed_passed, self.finished + self.resumed
