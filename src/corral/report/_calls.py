"""A benchmark's model calls counted per model: calls, failed tries by kind, time
waited on rate limits, mean latency (from each trial's terminal, which counts its
calls: the calls themselves are not read)."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from math import fsum
from typing import Any

from .._types import TrialRecord
from ..history import FAILURE_KINDS, CallCounts

#: How each kind of failed try is named where people read it.
FAILURE_NAMES = {
    "429": "rate limited (429)",
    "5xx": "server error (5xx)",
    "timeout": "timed out",
    "dropped": "connection dropped",
    "error": "refused",
}


def calls_by_model(trials: Iterable[TrialRecord]) -> dict[str, CallCounts]:
    """Every trial's model calls summed per model (`CallTally`)."""
    tally = CallTally()
    for t in trials:
        if t.model_calls:
            tally.add(t.model_calls)
    return tally.total()


class CallTally:
    """Model-call counts summed per model in any order, with the same result: counts
    exactly, seconds with `fsum` (a report from the store's trial heads sums them in
    another order than one from the records), models by name."""

    __slots__ = ("_of",)

    def __init__(self) -> None:
        # Per model: calls and untimed calls, failed tries by kind, waits, latencies.
        self._of: dict[str, tuple[list[int], dict[str, int], array[float], array[float]]] = {}

    def add(self, counted: Mapping[str, CallCounts]) -> None:
        of = self._of
        for model, c in counted.items():
            sums = of.get(model)
            if sums is None:
                sums = of[model] = ([0, 0], {}, array("d"), array("d"))
            sums[0][0] += c.calls
            sums[0][1] += c.untimed
            failed = sums[1]
            for kind, n in c.failed.items():
                failed[kind] = failed.get(kind, 0) + n
            if c.rate_limit_wait:
                sums[2].append(c.rate_limit_wait)
            if c.latency:
                sums[3].append(c.latency)

    def total(self) -> dict[str, CallCounts]:
        return {
            model: CallCounts(calls[0], dict(failed), fsum(waits), fsum(latencies), calls[1])
            for model, (calls, failed, waits, latencies) in sorted(self._of.items())
        }


def calls_dict(counts: Mapping[str, CallCounts]) -> dict[str, Any]:
    """The counts as JSON: per model its calls, failed tries (by kind, every kind
    present), seconds waited on rate limits and mean latency (of the calls that recorded
    theirs: `mean_latency`)."""
    return {
        model: {
            "calls": c.calls,
            "failed_tries": {kind: c.failed.get(kind, 0) for kind in _kinds(c)},
            "rate_limit_wait_seconds": round(c.rate_limit_wait, 3),
            "mean_latency_seconds": None if c.timed <= 0 else round(mean_latency(c), 4),
        }
        for model, c in counts.items()
    }


def calls_line(model: str, c: CallCounts) -> str:
    """One model's counts in a sentence (the CLI summary and the viewer)."""
    parts = [f"{model}: {c.calls:,} call{'s' if c.calls != 1 else ''}"]
    if c.timed > 0 and c.latency:
        parts.append(f"{mean_latency(c):.2f} s mean latency")
    failed = [f"{FAILURE_NAMES.get(k, k)} {c.failed[k]:,}" for k in _kinds(c) if c.failed.get(k)]
    parts.append("failed tries: " + ", ".join(failed) if failed else "no failed tries")
    if c.rate_limit_wait:
        parts.append(f"{c.rate_limit_wait:.1f} s waiting on rate limits")
    return " · ".join(parts)


def mean_latency(c: CallCounts) -> float:
    """The mean latency of the calls that recorded theirs (``c.timed`` > 0): a call
    recorded without one (`record_model_call`'s is optional) says nothing of how long
    calls take, and counted as 0 s it would pull the mean down."""
    return c.latency / c.timed


def _kinds(c: CallCounts) -> list[str]:
    """The known kinds, then any other a store holds."""
    return list(FAILURE_KINDS) + sorted(k for k in c.failed if k not in FAILURE_KINDS)
