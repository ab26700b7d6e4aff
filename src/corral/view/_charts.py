"""What the viewer draws rather than lists: distributions over trials and tasks.

Computed once per load; the page's script draws them as SVG.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import pairwise
from typing import Any

from ..report import BenchmarkReport
from ..report._tasks import task_rows
from ._index import Row

#: Bars of a histogram at most.
BINS = 20


def histogram(values: Iterable[float], bins: int = BINS) -> dict[str, Any]:
    """Counts of ``values`` in equal bins from their least to their greatest (one bin
    when all are equal), with the count, mean and median; empty when there are none."""
    data = [v for v in values if math.isfinite(v)]
    if not data:
        return {"count": 0, "low": None, "high": None, "mean": None, "median": None, "bins": []}
    data.sort()
    low, high = data[0], data[-1]
    width = (high - low) / bins if high > low else 0.0
    if width:

        def bin_of(v: float) -> int:
            return min(bins - 1, int((v - low) / width))

        # A value's bin never decreases as the value grows: in sorted data each bin
        # starts where a search finds it (a few dozen steps, not one per value).
        starts = [bisect_left(data, b, key=bin_of) for b in range(bins)]
        counts = [end - start for start, end in pairwise([*starts, len(data)])]
    else:
        counts = [len(data)]
    middle = len(data) // 2
    median = data[middle] if len(data) % 2 else (data[middle - 1] + data[middle]) / 2
    return {
        "count": len(data),
        "low": low,
        "high": high,
        "mean": sum(data) / len(data),
        "median": median,
        "bins": counts,
    }


def charts(rows: Sequence[Row], report: BenchmarkReport) -> dict[str, Any]:
    """The distributions the benchmark page draws: each finished trial's score, duration
    (seconds) and tokens, and each task's pass rate (passed / finished trials)."""
    ended = [r for r in rows if r.status not in ("running", "scoring")]
    return {
        "score": histogram(r.score for r in ended if r.score is not None),
        "duration": histogram(r.duration for r in ended if r.duration is not None),
        "tokens": histogram(float(r.tokens) for r in ended),
        "pass_rate": histogram((c / n for _, _, n, c, _ in task_rows(report.tasks) if n), bins=10),
    }
