"""A benchmark's model calls counted per model: calls, failed tries by kind, time
waited on rate limits, mean latency (from each trial's terminal, which counts its
calls: the calls themselves are not read)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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
    """Every trial's model calls summed per model (models in the order first met)."""
    out: dict[str, CallCounts] = {}
    for t in trials:
        counted = t.model_calls
        if not counted:
            continue
        for model, c in counted.items():
            before = out.get(model)
            out[model] = c if before is None else before + c
    return out


def calls_dict(counts: Mapping[str, CallCounts]) -> dict[str, Any]:
    """The counts as JSON: per model its calls, failed tries (by kind, every kind
    present), seconds waited on rate limits and mean latency."""
    return {
        model: {
            "calls": c.calls,
            "failed_tries": {kind: c.failed.get(kind, 0) for kind in _kinds(c)},
            "rate_limit_wait_seconds": round(c.rate_limit_wait, 3),
            "mean_latency_seconds": round(c.latency / c.calls, 4) if c.calls else None,
        }
        for model, c in counts.items()
    }


def calls_line(model: str, c: CallCounts) -> str:
    """One model's counts in a sentence (the CLI summary and the viewer)."""
    parts = [f"{model}: {c.calls:,} call{'s' if c.calls != 1 else ''}"]
    if c.calls and c.latency:
        parts.append(f"{c.latency / c.calls:.2f} s mean latency")
    failed = [f"{FAILURE_NAMES.get(k, k)} {c.failed[k]:,}" for k in _kinds(c) if c.failed.get(k)]
    parts.append("failed tries: " + ", ".join(failed) if failed else "no failed tries")
    if c.rate_limit_wait:
        parts.append(f"{c.rate_limit_wait:.1f} s waiting on rate limits")
    return " · ".join(parts)


def _kinds(c: CallCounts) -> list[str]:
    """The known kinds, then any other a store holds."""
    return list(FAILURE_KINDS) + sorted(k for k in c.failed if k not in FAILURE_KINDS)
