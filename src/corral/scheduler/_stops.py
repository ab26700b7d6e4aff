"""Stop rules: when a run stops admitting trials before every one has finished.

``fail_on_error`` (an error budget: trial errors and failed evaluations) and
``run_cost_limit`` (the cost every run of the benchmark recorded). What runs
finishes; the first reason is the one reported.
"""

from __future__ import annotations

from collections.abc import Callable

from .._budget import cost_reached
from .._types import Commit
from ..runtime._acks import Notify
from ..store._protocol import TrialKey


class StopRules:
    def __init__(
        self,
        stop: Callable[[], None],
        *,
        error_budget: int | None = None,
        run_cost_limit: float | None = None,
        spent: float = 0.0,
    ) -> None:
        self._stop_admission = stop
        #: Trial errors and failed evaluations this run may have before it stops
        #: admitting trials (``fail_on_error``; ``run_cost_limit`` is the other stop rule);
        #: None: never stop.
        self.error_budget = error_budget
        self.errors = 0
        #: Cost recorded by every run of this benchmark; at ``run_cost_limit``, admission stops.
        self.spent = spent
        self.run_cost_limit = run_cost_limit
        #: Why the run stopped before every trial finished, if it did.
        self.stopped: str | None = None
        #: Whether an evaluation may stop the run (a failed one counts as an error, a
        #: scorer's cost as spent): the run then starts evaluations before new trials.
        #: (Read at every admission: kept, not a property.)
        self.heed_evaluations = error_budget is not None or run_cost_limit is not None

    def count_error(self) -> None:
        self.errors += 1
        budget = self.error_budget
        if budget is not None and self.errors > budget:
            self._stop(
                f"fail_on_error: {self.errors} errors exceeded the limit of {budget}; "
                "no new trial was started after that"
            )

    def counting_cost(self, notify: Notify | None) -> Notify | None:
        """``notify`` (None: no observer), after adding each durable commit's cost to
        the run's spend (only with a ``run_cost_limit``)."""
        if self.run_cost_limit is None:
            return notify

        def counted(key: TrialKey, commit: Commit) -> None:
            cost = commit.usage.cost
            if cost:
                self.spent += cost
                self.check_cost()
            if notify is not None:
                notify(key, commit)

        return counted

    def check_cost(self) -> None:
        limit = self.run_cost_limit
        if limit is not None and cost_reached(self.spent, limit):
            self._stop(
                f"run_cost_limit: {self.spent:g} spent of {limit:g}; no new trial was started "
                "after that (run again with a higher run_cost_limit to continue)"
            )

    def _stop(self, reason: str) -> None:
        """Admit no new trial (what runs finishes); the first reason is the one reported."""
        if self.stopped is None:
            self.stopped = reason
            self._stop_admission()
