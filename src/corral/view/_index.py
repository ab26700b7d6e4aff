"""A benchmark's trial list, kept in memory: filtered, sorted and paged on the server.

The index is filled from the store's ``scan`` chunk by chunk, so the first page of
the list in scan order is ready after the first chunk while the rest loads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from .._costs import format_cost
from .._errors import ConfigError
from .._types import TrialRecord
from ..store._heads import TrialHead
from ..store._protocol import TrialSummary

#: Rows of one page unless asked otherwise, and the most one page may hold.
PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


class Row(NamedTuple):
    """One trial as the list shows it (``status`` is ``running`` or ``scoring`` until it ends)."""

    task_id: str
    trial: int
    model: str | None
    environment: str
    status: str
    error: str | None
    duration: float | None
    tokens: int
    cost: float
    score: float | None
    passed: bool
    attempts: int
    commits: int

    def to_dict(self) -> dict[str, Any]:
        return {**self._asdict(), "cost_text": format_cost(self.cost)}


#: Sort keys of the list: the column each sorts by ("" is the store's order: task, trial).
SORTS = {
    "task": "task_id",
    "model": "model",
    "environment": "environment",
    "status": "status",
    "error": "error",
    "duration": "duration",
    "tokens": "tokens",
    "cost": "cost",
    "score": "score",
}


def row_of(
    summary: TrialSummary, record: TrialRecord | None, model: str | None, environment: str
) -> Row:
    """The list's row for one trial summary; ``record`` is its record if it is finished."""
    if summary.terminal is None:
        return Row(
            summary.task_id,
            summary.trial,
            model,
            environment,
            "running",
            None,
            None,
            summary.usage.input_tokens + summary.usage.output_tokens,
            summary.usage.cost,
            None,
            False,
            0,
            summary.commits,
        )
    if record is None:
        record = summary.record(keep_state=False, scored=False)
        status = "scoring"
    else:
        status = str(record.status)
    ev = record.evaluation
    duration = None
    if record.finished_at is not None and record.started_at is not None:
        duration = record.finished_at - record.started_at
    return Row(
        record.task_id,
        record.trial,
        model,
        environment,
        status,
        record.error,
        duration,
        record.usage.input_tokens + record.usage.output_tokens,
        record.usage.cost,
        None if ev is None else float(ev.score),
        record.passed,
        record.attempts,
        record.commits,
    )


def row_of_head(head: TrialHead, model: str | None, environment: str) -> Row:
    """The list's row for a trial the store keeps a head of (`row_of`'s, read from it)."""
    usage = head.usage
    status = head.status
    if status is None:
        status = "running"
    elif not head.done:
        status = "scoring"
    duration = None
    if head.status is not None and head.finished_at is not None and head.started_at is not None:
        duration = head.finished_at - head.started_at
    return _new(  # Row(...) without parsing its arguments: once per trial of a load
        Row,
        (
            head.task_id,
            head.trial,
            model,
            environment,
            status,
            head.error if head.status is not None else None,
            duration,
            usage.input_tokens + usage.output_tokens,
            usage.cost,
            head.score if head.done else None,
            head.passed and head.done,
            head.attempts if head.status is not None else 0,
            head.commits,
        ),
    )


_new = tuple.__new__


@dataclass(frozen=True, slots=True)
class TrialQuery:
    """Which trials the list shows, in which order, and which page.

    In a URL: ``task_has`` and ``error_has`` (substrings), ``model``, ``environment``,
    ``status`` and ``passed`` (yes/no) exactly, ``sort`` (a key of `SORTS`, ``-`` first
    for descending), ``page`` and ``size``.
    """

    task: str = ""
    error: str = ""
    model: str = ""
    environment: str = ""
    status: str = ""
    passed: bool | None = None
    sort: str = ""
    descending: bool = False
    page: int = 0
    size: int = PAGE_SIZE

    @classmethod
    def from_params(cls, params: Mapping[str, str]) -> TrialQuery:
        """The query a URL's parameters describe; a `ConfigError` names a bad value."""
        sort = params.get("sort", "")
        descending = sort.startswith("-")
        sort = sort.removeprefix("-")
        if sort and sort not in SORTS:
            raise ConfigError(f"sort: {sort!r} is not one of {', '.join(SORTS)}")
        passed_text = params.get("passed", "")
        if passed_text not in ("", "yes", "no"):
            raise ConfigError(f"passed: {passed_text!r} is not yes or no")
        return cls(
            task=params.get("task_has", ""),
            error=params.get("error_has", ""),
            model=params.get("model", ""),
            environment=params.get("environment", ""),
            status=params.get("status", ""),
            passed=None if not passed_text else passed_text == "yes",
            sort=sort,
            descending=descending,
            page=_count("page", params.get("page", "0"), 0, 10**9),
            size=_count("size", params.get("size", str(PAGE_SIZE)), 1, MAX_PAGE_SIZE),
        )

    @property
    def plain(self) -> bool:
        """True for the store's order without filters: answerable from a partial index."""
        return not (
            self.task
            or self.error
            or self.model
            or self.environment
            or self.status
            or self.sort
            or self.passed is not None
        )

    def matches(self, row: Row) -> bool:
        if self.task and self.task not in row.task_id:
            return False
        if self.error and (row.error is None or self.error not in row.error):
            return False
        if self.model and row.model != self.model:
            return False
        if self.environment and row.environment != self.environment:
            return False
        if self.status and row.status != self.status:
            return False
        return self.passed is None or row.passed == self.passed


def _count(name: str, text: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ConfigError(f"{name}: {text!r} is not an integer") from None
    if not low <= value <= high:
        raise ConfigError(f"{name}: {value} is outside {low}..{high}")
    return value


def select(rows: list[Row], query: TrialQuery) -> list[Row]:
    """The rows ``query`` keeps, in its order (missing values last either way)."""
    kept = rows if query.plain else [r for r in rows if query.matches(r)]
    if not query.sort:
        return kept
    index = Row._fields.index(SORTS[query.sort])
    present = [r for r in kept if r[index] is not None]
    missing = [r for r in kept if r[index] is None]
    present.sort(key=lambda r: (r[index], r.task_id, r.trial), reverse=query.descending)
    return present + missing


def page_of(selected: list[Row], query: TrialQuery) -> list[Row]:
    start = query.page * query.size
    return selected[start : start + query.size]


def facets(rows: Iterable[Row]) -> dict[str, dict[str, int]]:
    """How many trials have each model, environment and status (for the filter menus)."""
    out: dict[str, dict[str, int]] = {"model": {}, "environment": {}, "status": {}}
    for r in rows:
        for name, value in (
            ("model", r.model),
            ("environment", r.environment),
            ("status", r.status),
        ):
            key = "" if value is None else value
            out[name][key] = out[name].get(key, 0) + 1
    return out
