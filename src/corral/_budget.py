"""Per-trial budgets: tokens, cost and working time.

A budget is checked against the trial's durable history since its latest
``reopen`` (a rerun is a fresh attempt with a fresh budget): usage is summed
from the commits, and working time is recorded on every commit as the running
total ``worked``, so a resumed trial (after a crash, a retry or a rate-limit
deferral) goes on from what it had already spent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ._checks import positive_int, positive_number
from ._types import BenchmarkTaskMetadata, Usage

#: The budgets a task's metadata or a run may set, in the order they are checked.
BUDGET_NAMES = ("token_limit", "cost_limit", "working_time_limit")


def check_budget(name: str, value: object, where: str = "") -> float | int | None:
    """``value`` if it is a valid ``name`` budget (or None), else a `ConfigError` naming it."""
    what = f"{where} {name}".strip()
    if name == "token_limit":
        return positive_int(what, value, or_none=True)
    unit = "seconds" if name == "working_time_limit" else ""
    return positive_number(what, value, unit=unit, or_none=True)


@dataclass(frozen=True, slots=True)
class Budget:
    """What one trial may spend: input+output tokens, cost (in the units recorded with
    ``record_usage``) and seconds of working time. None: no limit."""

    token_limit: int | None = None
    cost_limit: float | None = None
    working_time_limit: float | None = None

    def __post_init__(self) -> None:
        for name in BUDGET_NAMES:
            check_budget(name, getattr(self, name))

    def __bool__(self) -> bool:  # read once per trial: no loop
        return (
            self.token_limit is not None
            or self.cost_limit is not None
            or self.working_time_limit is not None
        )

    def under(self, task: BenchmarkTaskMetadata) -> Budget:
        """This (run-wide) budget with each limit ``task`` (a task's metadata) sets."""
        tokens, cost, seconds = task.token_limit, task.cost_limit, task.working_time_limit
        if tokens is None and cost is None and seconds is None:
            return self  # the common case: no object per trial
        return Budget(
            self.token_limit if tokens is None else tokens,
            self.cost_limit if cost is None else cost,
            self.working_time_limit if seconds is None else seconds,
        )

    def to_dict(self) -> dict[str, Any]:
        """The limits that are set, by name."""
        return {n: getattr(self, n) for n in BUDGET_NAMES if getattr(self, n) is not None}

    def exceeded(self, usage: Usage, worked: float) -> Exceeded | None:
        """The first budget that ``usage`` and ``worked`` seconds overrun, or None.

        Tokens and cost overrun when spent beyond the limit; working time when it
        reaches the limit (the clock is stopped there).
        """
        if self.token_limit is not None:
            tokens = usage.input_tokens + usage.output_tokens
            if tokens > self.token_limit:
                return Exceeded("token_limit", tokens, self.token_limit)
        if self.cost_limit is not None and cost_over(usage.cost, self.cost_limit):
            return Exceeded("cost_limit", usage.cost, self.cost_limit)
        if self.working_time_limit is not None and worked >= self.working_time_limit:
            return Exceeded("working_time_limit", round(worked, 6), self.working_time_limit)
        return None


NO_BUDGET = Budget()

#: How far apart a sum of costs and a limit may be and still be equal: adding costs
#: rounds (0.1 three times is 0.30000000000000004), which must not overrun a budget of
#: 0.3, nor stop a run's 0.9999999999999999 short of a limit of 1.
_COST_TOLERANCE = 1e-9


def cost_over(spent: float, limit: float) -> bool:
    """Whether a cost ``spent`` (a sum) is beyond ``limit``, not merely off by rounding."""
    return spent > limit and not math.isclose(spent, limit, rel_tol=_COST_TOLERANCE)


def cost_reached(spent: float, limit: float) -> bool:
    """Whether a cost ``spent`` (a sum) has reached ``limit``, up to rounding."""
    return spent >= limit or math.isclose(spent, limit, rel_tol=_COST_TOLERANCE)


@dataclass(frozen=True, slots=True)
class Exceeded:
    """Which budget a trial overran, what it spent and what it was allowed."""

    name: str
    spent: float
    limit: float

    def fields(self) -> dict[str, Any]:
        """What the terminal commit records besides its status."""
        unit = {"token_limit": " tokens", "working_time_limit": " s"}.get(self.name, "")
        spent, limit = _shown(self.spent), _shown(self.limit)
        return {
            "limit": self.name,
            "spent": self.spent,
            "limit_value": self.limit,
            "error": f"{self.name} exceeded: spent {spent}{unit} of {limit}{unit}",
        }


def _shown(value: float) -> str:
    """A figure for a message: integers whole, other numbers to 6 significant digits."""
    return str(value) if isinstance(value, int) else f"{value:.6g}"
