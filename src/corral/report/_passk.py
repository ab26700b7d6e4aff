"""The unbiased pass@k estimator (Chen et al., 2021)."""

from __future__ import annotations

from math import comb


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n - c, k) / C(n, k): the chance that k of n trials, c of them passing, hold a pass."""
    if not 0 <= c <= n:
        raise ValueError(f"passed count {c} is outside 0..{n}")
    if not 1 <= k <= n:
        raise ValueError(f"k = {k} is outside 1..{n}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)
