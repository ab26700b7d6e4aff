"""Which tasks a run takes: ``sample_ids``, a seeded ``shuffle`` and a ``limit``."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

from ._checks import flag, positive_int
from ._errors import ConfigError
from ._suggest import did_you_mean


def select_samples(
    tasks: Mapping[str, Any],
    task_ids: Sequence[str] | None,
    *,
    limit: int | None,
    shuffle: bool,
    seed: int | None,
    sample_ids: Sequence[str] | None,
) -> Sequence[str] | None:
    """The task ids to run (None: all of them, as before), or a `ConfigError` naming
    the bad argument.

    ``sample_ids`` picks tasks by id (like ``task_ids``; not both); ``shuffle``
    orders the candidates by ``seed`` (0 if None) before ``limit`` keeps the first
    N, so the same seed always draws the same sample. Only ids are read: a streamed
    source's tasks are never parsed here.
    """
    flag("shuffle", shuffle)
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"seed must be an integer, not {seed!r}")
        if not shuffle:
            raise ConfigError(f"seed={seed!r} orders a shuffle: give shuffle=True too")
    if limit is not None:
        positive_int("limit", limit)
    if sample_ids is not None:
        if task_ids is not None:
            raise ConfigError("give task_ids or sample_ids, not both")
        if isinstance(sample_ids, str) or not isinstance(sample_ids, Sequence) or not sample_ids:
            raise ConfigError(f"sample_ids must be a non-empty list of ids, not {sample_ids!r}")
        for sample in sample_ids:
            if sample not in tasks:
                raise ConfigError(
                    f"unknown sample id {sample!r} in sample_ids{did_you_mean(str(sample), tasks)}"
                )
        task_ids = list(dict.fromkeys(sample_ids))
    if not shuffle and limit is None:
        return task_ids
    # Each id once: a repeat would take a place under the limit, and move the shuffle.
    chosen = list(tasks) if task_ids is None else list(dict.fromkeys(task_ids))
    if shuffle:
        unknown: list[str] = []
        if task_ids is not None:
            # From the benchmark's order, not the order given: the same ids, listed in
            # any order, draw the same sample. An unknown id goes first (no limit cuts
            # it), for the plan to refuse by name.
            given = set(chosen)
            unknown = [t for t in chosen if t not in tasks]
            chosen = [t for t in tasks if t in given]
        random.Random(0 if seed is None else seed).shuffle(chosen)
        chosen = unknown + chosen
    return chosen if limit is None else chosen[:limit]
