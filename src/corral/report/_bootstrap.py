"""Bootstrap intervals of means over tasks: deterministic, fast whatever the task count.

Resampling N tasks with replacement is a multinomial draw over the distinct task
outcomes (a task's pass@k and pass^k depend only on its trial count and passes),
so with many tasks a resample costs one binomial per distinct outcome, not one
draw per task: 10,000 tasks cost what 200 do. Everything is stdlib; a
`random.Random(seed)` made per call keeps the result a function of the inputs alone.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Mapping, Sequence
from itertools import accumulate
from math import floor, fsum, lgamma, log, pi, sqrt, tan
from operator import mul, sub
from statistics import NormalDist

#: Coverage of every interval Corral reports.
CONFIDENCE = 0.95
#: Bootstrap resamples per interval.
RESAMPLES = 2000
#: The seed of every bootstrap: the same data give the same interval, run after run.
SEED = 0


def binomial(rng: random.Random, n: int, p: float) -> int:
    """One draw from Binomial(n, p).

    Devroye's geometric method when n·p < 10 (expected O(n·p) steps), else
    Hörmann's BTRS transformed rejection with squeeze (expected O(1)); the
    same algorithms as ``random.binomialvariate`` of Python 3.12, which 3.11 lacks.
    """
    if p <= 0.0 or n <= 0:
        return 0
    if p >= 1.0:
        return n
    if p > 0.5:
        return n - binomial(rng, n, 1.0 - p)
    if n * p < 10.0:
        x = y = 0
        c = log(1.0 - p)
        if not c:  # p so small that 1 - p rounds to 1
            return 0
        while True:
            y += floor(log(1.0 - rng.random()) / c) + 1
            if y > n:
                return x
            x += 1
    spq = sqrt(n * p * (1.0 - p))
    b = 1.15 + 2.53 * spq
    a = -0.0873 + 0.0248 * b + 0.01 * p
    c = n * p + 0.5
    vr = 0.92 - 4.2 / b
    setup = False
    while True:
        u = rng.random() - 0.5
        us = 0.5 - abs(u)
        k = floor((2.0 * a / us + b) * u + c)
        if k < 0 or k > n:
            continue
        v = rng.random()
        if us >= 0.07 and v <= vr:  # the squeeze: most draws end here
            return k
        if not setup:  # the exact test's constants, needed for few draws
            alpha = (2.83 + 5.1 / b) * spq
            lpq = log(p / (1.0 - p))
            m = floor((n + 1) * p)  # the mode
            h = lgamma(m + 1) + lgamma(n - m + 1)
            setup = True
        v *= alpha / (a / (us * us) + b)
        # log(0) would be -inf: below any bound, so accepted.
        if v <= 0.0 or log(v) <= h - lgamma(k + 1) - lgamma(n - k + 1) + (k - m) * lpq:
            return k


def multinomial(rng: random.Random, n: int, weights: Sequence[int]) -> list[int]:
    """How many of ``n`` draws with replacement land on each of the ``weights``' items
    (item i drawn with probability weights[i] / sum(weights)): a conditional binomial
    per item, whose cost does not grow with ``n``."""
    out = [0] * len(weights)
    left_n, left_w = n, sum(weights)
    for i, w in enumerate(weights):
        if left_n == 0:
            break
        if w >= left_w:
            out[i] = left_n
            break
        x = binomial(rng, left_n, w / left_w)
        out[i] = x
        left_n -= x
        left_w -= w
    return out


#: Up to this many members per kind, `bootstrap_means` draws members one by one (a
#: binomial costs about as much as twenty single draws).
DIRECT_PER_KIND = 20


def bootstrap_means(
    counts: Sequence[int],
    columns: Sequence[Sequence[float]],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> list[list[float]]:
    """Bootstrap distributions of several means over one population, sorted.

    The population has ``counts[j]`` members of kind j; ``columns[q][j]`` is quantity
    q of a member of kind j. Each resample draws sum(counts) members with replacement
    and takes every quantity's mean over them, so all quantities see the same resamples.
    """
    total = sum(counts)
    if total <= 0:
        raise ValueError("a bootstrap needs at least one member")
    rng = random.Random(seed)
    direct = total <= DIRECT_PER_KIND * len(counts)
    if direct and (total + 1) ** len(counts) <= 2**62:
        return _coded(rng, total, counts, columns, resamples)
    out: list[list[float]] = [[] for _ in columns]
    members = [j for j, count in enumerate(counts) for _ in range(count)] if direct else []
    terms = [scaled(values, total) for values in columns]
    for _ in range(resamples):
        if direct:
            drawn = [0] * len(counts)
            for j in rng.choices(members, k=total):
                drawn[j] += 1
        else:
            drawn = multinomial(rng, total, counts)
        for q, (values, divisor) in enumerate(terms):
            out[q].append(sum(map(mul, drawn, values)) / divisor)
    for dist, values in zip(out, columns, strict=True):
        low, high = _span(counts, values)
        dist[:] = sorted(low if x < low else high if x > high else x for x in dist)
    return out


#: Resamples drawn at a time by `_coded` (bounds the draws it holds).
BLOCK = 256


def _coded(
    rng: random.Random,
    total: int,
    counts: Sequence[int],
    columns: Sequence[Sequence[float]],
    resamples: int,
) -> list[list[float]]:
    """`bootstrap_means` with members drawn one by one, as ``rng.choices(members,
    k=total)`` draws them: the same ``random()`` calls, hence the same resamples.

    A resample is known by how many members of each kind it drew; where that fits in
    one machine word, it is coded as an integer (``total + 1`` to the power of the
    kind, summed in C loops a block of resamples at a time) and its means are worked
    out once per distinct code, not once per resample."""
    base = total + 1
    weights = [base**j for j in range(len(counts))]
    if sum(1 for count in counts if count) == 1:  # every resample draws the population
        codes = [sum(map(mul, counts, weights))] * resamples
    else:
        members = [weights[j] for j, count in enumerate(counts) for _ in range(count)]
        draw, n = rng.random, float(total)  # what choices() multiplies by
        codes = []
        for block in range(0, resamples, BLOCK):
            drawn = [
                members[floor(draw() * n)] for _ in range(min(BLOCK, resamples - block) * total)
            ]
            ends = [0, *accumulate(drawn)][::total]
            codes += map(sub, ends[1:], ends)
    out = []
    for values in columns:
        low, high = _span(counts, values)
        terms, divisor = scaled(values, total)
        means = {}
        for code in set(codes):
            drawn_per_kind = [code // weight % base for weight in weights]
            x = sum(map(mul, drawn_per_kind, terms)) / divisor
            means[code] = low if x < low else high if x > high else x
        out.append(sorted(map(means.__getitem__, codes)))
    return out


def weighted_mean(counts: Sequence[int], values: Sequence[float]) -> float:
    """The mean of ``counts[j]`` copies of each ``values[j]``, within the values present."""
    terms, divisor = scaled(values, sum(counts))
    mean = fsum(c * v for c, v in zip(counts, terms, strict=True)) / divisor
    low, high = _span(counts, values)
    return min(max(mean, low), high)


def plain_mean(values: Sequence[float]) -> float:
    """The mean of ``values`` (at least one), summed exactly."""
    terms, divisor = scaled(values, len(values))
    return fsum(terms) / divisor


def scaled(values: Sequence[float], total: int) -> tuple[Sequence[float], float]:
    """``values`` and ``total``: a mean of ``total`` of them is their sum over it. But
    where such a sum could pass the largest float (values near it, which a named score
    may take: they are finite), the values divided by ``total``, and 1: no sum then
    overflows to inf (or fails, as `fsum` does), and the mean stays finite."""
    if max(map(abs, values), default=0.0) * total <= sys.float_info.max:
        return values, float(total)
    return [v / total for v in values], 1.0


def _span(counts: Sequence[int], values: Sequence[float]) -> tuple[float, float]:
    """The smallest and largest value present. A mean of equal values can round past
    them (3 x 0.2 / 3 > 0.2); means are kept within, so that an interval never shows
    1.0000000000000002."""
    present = [v for v, count in zip(values, counts, strict=True) if count]
    return min(present), max(present)


def percentile_interval(
    dist: Sequence[float], value: float, members: int, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The ``confidence`` interval from a sorted bootstrap distribution of a mean over
    ``members`` resampled members, widened if need be to hold the point estimate ``value``.

    The plain percentile interval is too narrow for few members (it covers 84-92% for
    10 tasks instead of 95%); this is Hesterberg's expanded percentile interval, whose
    tails are taken at Phi(-sqrt(n/(n-1)) t[n-1]) instead of (1 - confidence)/2, which
    corrects that and tends to the plain one as n grows.
    """
    if members < 2:  # nothing to resample: every resample is the one member
        return value, value
    quantile = t_quantile(0.5 + confidence / 2.0, members - 1)
    tail = NormalDist().cdf(-sqrt(members / (members - 1)) * quantile)
    last = len(dist) - 1
    low = dist[round(last * tail)]
    high = dist[round(last * (1.0 - tail))]
    return min(low, value), max(high, value)


def t_quantile(q: float, df: int) -> float:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom: exact for df 1
    and 2, else the Cornish-Fisher expansion around the normal (Abramowitz & Stegun
    26.7.5), within 0.15% at df = 3 and closer as df grows."""
    if df == 1:
        return tan(pi * (q - 0.5))
    if df == 2:
        return (2.0 * q - 1.0) / sqrt(2.0 * q * (1.0 - q))
    z = NormalDist().inv_cdf(q)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def grouped(values: Mapping[tuple[float, ...], int]) -> tuple[list[int], list[list[float]]]:
    """``{(q0, q1, ...): count}`` as (counts, columns) for `bootstrap_means`: most
    frequent first (the draws for rare kinds then start from few members left, which is
    quicker), ties by value, so that the result does not depend on the tasks' order."""
    kinds = sorted(values, key=lambda kind: (-values[kind], kind))
    counts = [values[kind] for kind in kinds]
    width = len(kinds[0]) if kinds else 0
    columns = [[kind[q] for kind in kinds] for q in range(width)]
    return counts, columns
