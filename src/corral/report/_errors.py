"""Grouping the errors of a report by message, so a thousand failures read as a few lines."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: Trials named as examples in each group.
EXAMPLES = 3

# What varies between occurrences of one error: uuids, hex addresses or ids, numbers.
_VARYING = re.compile(
    r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
    r"|0[xX][0-9a-fA-F]+"
    r"|\d+(?:\.\d+)?"
)


def error_key(message: str) -> str:
    """``message`` with numbers, hex ids and uuids replaced by ``#``: messages that differ
    only there (``row 17`` and ``row 18``) are one error."""
    return _VARYING.sub("#", message)


@dataclass(frozen=True, slots=True)
class ErrorGroup:
    """Trials that ended with one error (``"Type: message"``, numbers and ids aside).

    ``message`` is the first such trial's exact message; ``examples`` name up to
    three trials as ``"task#trial"``; ``variants`` counts the distinct exact messages.
    """

    message: str
    count: int
    examples: tuple[str, ...]
    variants: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "count": self.count,
            "examples": list(self.examples),
            "variants": self.variants,
        }


class ErrorGroups:
    """Collects (trial, message) pairs; ``groups()`` gives them most frequent first."""

    def __init__(self) -> None:
        # key -> [first message, count, examples, distinct messages]; dicts keep first-seen order.
        self._by_key: dict[str, tuple[str, list[int], list[str], set[str]]] = {}

    def add(self, task_id: str, trial: int, message: str) -> None:
        key = error_key(message)
        entry = self._by_key.get(key)
        if entry is None:
            entry = self._by_key[key] = (message, [0], [], set())
        entry[1][0] += 1
        if len(entry[2]) < EXAMPLES:
            entry[2].append(f"{task_id}#{trial}")
        entry[3].add(message)

    def groups(self) -> tuple[ErrorGroup, ...]:
        out = [
            ErrorGroup(message, count[0], tuple(examples), len(variants))
            for message, count, examples, variants in self._by_key.values()
        ]
        # Stable: equal counts stay in the order first seen (task order, then trial).
        out.sort(key=lambda g: -g.count)
        return tuple(out)


#: Statuses that are not errors but are no clean ``Final`` either: a report lists them
#: like errors (`BenchmarkReport.endings`), each with examples to `corral show`.
ENDING_STATUSES = ("timeout", "max_iterations", "limit")


def ending_message(status: str, error: str | None) -> str:
    """What a trial that ended ``status`` is grouped by: its recorded error (a timeout's
    or a budget's), else what the status means."""
    if error:
        return error
    if status == "max_iterations":
        return "no Final answer within the task's max_iterations turns"
    return status


def total(groups: Iterable[ErrorGroup]) -> int:
    return sum(g.count for g in groups)
