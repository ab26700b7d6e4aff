"""The ETA, bounded below by the limit that binds: work left behind each limit."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Lane:
    """Trials that must pass one limit: how many are left, how many may run at once,
    and how long one of them ran on average (None: none has finished yet)."""

    name: str
    remaining: int
    limit: int
    mean_duration: float | None

    @property
    def seconds_left(self) -> float | None:
        if self.remaining <= 0:
            return 0.0
        if self.mean_duration is None or self.limit <= 0:
            return None
        return self.remaining * self.mean_duration / self.limit


def estimate_eta(
    remaining: int, done_now: int, elapsed: float, lanes: Iterable[Lane]
) -> tuple[float | None, str | None]:
    """(seconds left, the lane that binds or None) for a run with ``remaining`` trials.

    The run's own rate (``done_now`` trials in ``elapsed`` seconds) is one
    estimate; each lane gives a lower bound: 100 trials left on a model limited
    to 2, each taking d seconds, need at least 50 d however fast the rest goes.
    The largest wins. None when nothing has finished yet.
    """
    if remaining <= 0:
        return 0.0, None
    best: float | None = remaining * elapsed / done_now if done_now > 0 else None
    binding = None
    for lane in lanes:
        bound = lane.seconds_left
        if bound is not None and (best is None or bound > best):
            best, binding = bound, lane.name
    return best, binding
