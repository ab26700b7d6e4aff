"""Each task id's position in a run's order, found without a dict of every id."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Sequence


class Positions:
    """Each task id's position in ``ids`` (None: not there), without a dict of every id
    (some 65 bytes a task): the positions in id order, an array walked with a cursor,
    since a store gives heads and scans in (task id, trial) order; any other order is
    found by bisection."""

    __slots__ = ("_ids", "_order", "_at")

    def __init__(self, ids: Sequence[str]) -> None:
        self._ids = ids
        self._order = array("l", sorted(range(len(ids)), key=ids.__getitem__))
        self._at = 0

    def get(self, task_id: str) -> int | None:
        ids, order, at = self._ids, self._order, self._at
        if at < len(order):
            position = order[at]
            if ids[position] == task_id:  # the next trial of the same task
                return position
            at += 1
            if at < len(order) and ids[order[at]] == task_id:  # the next task
                self._at = at
                return order[at]
        at = bisect_left(order, task_id, key=ids.__getitem__)
        if at < len(order) and ids[order[at]] == task_id:
            self._at = at
            return order[at]
        return None
