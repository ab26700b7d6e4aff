"""The unbiased pass@k and pass^k estimators."""

from __future__ import annotations

from math import comb

from .._errors import ConfigError


def pass_at_k(n: int, c: int, k: int) -> float:
    """1 - C(n - c, k) / C(n, k): the chance that k of n trials, c of them passing, hold a pass
    (Chen et al., 2021)."""
    _check(n, c, k)
    total = comb(n, k)
    # One division of exact integers: correctly rounded, so pass@1 == pass^1 == c/n exactly.
    return (total - comb(n - c, k)) / total


def pass_hat_k(n: int, c: int, k: int) -> float:
    """C(c, k) / C(n, k): the chance that k of n trials, c of them passing, all pass
    (pass^k, as in tau-bench): how reliably the agent succeeds, where pass@k is how
    often it succeeds at least once."""
    _check(n, c, k)
    if c < k:
        return 0.0
    return comb(c, k) / comb(n, k)


def default_ks(trials: int) -> tuple[int, ...]:
    """1, 2, 4, ... up to the trial count, and the trial count itself."""
    ks = [1 << i for i in range(trials.bit_length()) if 1 << i <= trials]
    return tuple(ks if ks[-1] == trials else [*ks, trials])


def _check(n: int, c: int, k: int) -> None:
    # ConfigError (a ValueError) like every refusal of bad input, naming the value.
    # Integers of any type math.comb takes (numpy's too), but not True or 1.0.
    for name, value in (("trial count", n), ("passed count", c), ("k", k)):
        if isinstance(value, bool) or not hasattr(type(value), "__index__"):
            raise ConfigError(f"{name} must be an integer, not {value!r}")
    if not 0 <= c <= n:
        raise ConfigError(f"passed count {c} is outside 0..{n}")
    if not 1 <= k <= n:
        raise ConfigError(f"k = {k} is outside 1..{n}")
