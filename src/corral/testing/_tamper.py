"""Corrupting a store on purpose, to test that every reader refuses it cleanly.

`tamper` rewrites one column of a table, in an SQLite file or a PostgreSQL
database, behind the store's back (as a stray script, a bad migration or a
hand edit would). `CORRUPTIONS` names one bad value for each column (and for
each field of the stored configuration and of the payloads readers use).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Callable, Mapping
from contextlib import closing
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

#: The columns that name a row of each table.
_KEYS = {
    "benchmarks": ("benchmark_id",),
    "commits": ("benchmark_id", "task_id", "trial", "seq"),
    "meta": ("key",),
    "runs": ("benchmark_id", "run"),
}

#: A new value, or a function of the old one giving it.
Value = Any | Callable[[Any], Any]


def tamper(
    store: str | os.PathLike[str], table: str, column: str, value: Value, where: str = ""
) -> int:
    """Set ``column`` of ``table`` to ``value`` (or ``value(old)``) in every row (or those
    matching the SQL condition ``where``) of the store at ``store``: an SQLite file or a
    ``postgresql://`` URI. Returns how many rows were changed."""
    if table not in _KEYS:
        raise ValueError(f"no table {table!r} in a Corral store (one of {', '.join(_KEYS)})")
    keys = _KEYS[table]
    condition = f" WHERE {where}" if where else ""
    if isinstance(store, str) and store.startswith(("postgresql://", "postgres://")):
        import psycopg

        with psycopg.connect(store, autocommit=False) as conn:
            return _rewrite(conn, f"corral.{table}", keys, column, value, condition, "%s")
    with closing(sqlite3.connect(store)) as db, db:
        return _rewrite(db, table, keys, column, value, condition, "?")


def _rewrite(
    conn: Any, table: str, keys: tuple[str, ...], column: str, value: Value, where: str, mark: str
) -> int:
    rows = conn.execute(f"SELECT {', '.join(keys)}, {column} FROM {table}{where}").fetchall()
    match = " AND ".join(f"{k} = {mark}" for k in keys)
    for *key, old in rows:
        new = value(old) if callable(value) else value
        conn.execute(f"UPDATE {table} SET {column} = {mark} WHERE {match}", (new, *key))
    return len(rows)


def json_edit(**fields: Any) -> Callable[[Any], str]:
    """A `tamper` value that edits a JSON object column: each field set to its value
    (`DELETE` removes it; a dotted name ``"tasks.*"`` edits every entry of ``tasks``)."""

    def edit(old: Any) -> str:
        data = json.loads(old)
        for name, new in fields.items():
            _set(data, name.split("."), new)
        return json.dumps(data)

    return edit


#: A `json_edit` value that removes the field.
DELETE = object()


def _set(data: Any, path: list[str], new: Any) -> None:
    head, rest = path[0], path[1:]
    for key in list(data) if head == "*" else [head]:
        if rest:
            _set(data[key], rest, new)
        elif new is DELETE:
            data.pop(key, None)
        else:
            data[key] = new


@dataclass(frozen=True)
class Corruption:
    """One way to damage a store: ``tamper(store, table, column, value, where)``.

    ``sql_types`` is False when the value only fits SQLite's loose column types (text
    in a number column): a PostgreSQL column refuses it.
    """

    table: str
    column: str
    value: Value
    where: str = ""
    sql_types: bool = True

    def apply(self, store: str | os.PathLike[str]) -> int:
        """Damage the store at ``store`` (a path or URI); how many rows were changed."""
        return tamper(store, self.table, self.column, self.value, self.where)


def _config(**fields: Any) -> Corruption:
    return Corruption("benchmarks", "config", json_edit(**fields))


def _payload(kind: str, **fields: Any) -> Corruption:
    return Corruption("commits", "payload", json_edit(**fields), f"kind = '{kind}'")


def _loose(table: str, column: str, value: Any, where: str = "") -> Corruption:
    return Corruption(table, column, value, where, sql_types=False)


CORRUPTIONS: Mapping[str, Corruption] = MappingProxyType(
    {
        "config not JSON": Corruption("benchmarks", "config", "{not json"),
        "config not an object": Corruption("benchmarks", "config", "[1, 2]"),
        "trials_per_task text": _config(trials_per_task="two"),
        "trials_per_task missing": _config(trials_per_task=DELETE),
        "trials_per_task huge": _config(trials_per_task=10**12),
        "trials_per_task zero": _config(trials_per_task=0),
        "tasks not an object": _config(tasks="t0"),
        "task not an object": _config(**{"tasks.*": 5}),
        "task agent_id list": _config(**{"tasks.*.agent_id": ["a"]}),
        "task environment_id missing": _config(**{"tasks.*.environment_id": DELETE}),
        "task environment_id number": _config(**{"tasks.*.environment_id": 7}),
        "task max_iterations text": _config(**{"tasks.*.max_iterations": "ten"}),
        "task model number": _config(**{"tasks.*.model": 3}),
        "benchmark created_at text": _loose("benchmarks", "created_at", "yesterday"),
        "benchmark created_at huge": Corruption("benchmarks", "created_at", 1e300),
        "benchmark created_at negative": Corruption("benchmarks", "created_at", -1e12),
        "schema_version text": Corruption("meta", "value", "one", "key = 'schema_version'"),
        "benchmark_id blob": _loose("benchmarks", "benchmark_id", b"\xff"),
        "task_id blob": _loose("commits", "task_id", b"\xff", "task_id = 'odd'"),
        "trial text": _loose("commits", "trial", "zero", "trial = 0"),
        "trial negative": Corruption("commits", "trial", -1, "trial = 0"),
        "trial huge": Corruption("commits", "trial", 10**9, "trial = 0"),
        "seq text": _loose("commits", "seq", "first", "seq = 0"),
        "seq negative": Corruption("commits", "seq", -7, "seq = 0"),
        "kind unknown": Corruption("commits", "kind", "bogus", "kind = 'terminal'"),
        "payload not JSON": Corruption("commits", "payload", "{not json"),
        "payload not an object": Corruption("commits", "payload", "[]"),
        "payload with NaN": Corruption("commits", "payload", '{"state": NaN}', "kind = 'setup'"),
        "payload nested too deeply": Corruption("commits", "payload", "[" * 100_000),
        "terminal status unknown": _payload("terminal", status="exploded"),
        "terminal status missing": _payload("terminal", status=DELETE),
        "terminal attempts text": _payload("terminal", attempts="one"),
        "evaluation score text": _payload("evaluation", score="high"),
        "evaluation passed text": _payload("evaluation", passed="yes"),
        "setup previous_trial text": _payload("setup", previous_trial="last"),
        "action turn text": _payload("action", turn="first"),
        "tool_effect action_seq negative": _payload("tool_effect", action_seq=-1),
        "created_at text": _loose("commits", "created_at", "noon"),
        "created_at huge": Corruption("commits", "created_at", 1e300),
        "created_at infinite": Corruption("commits", "created_at", math.inf),
        "input_tokens text": _loose("commits", "input_tokens", "many"),
        "input_tokens negative": Corruption("commits", "input_tokens", -5),
        "output_tokens text": _loose("commits", "output_tokens", "lots"),
        "output_tokens negative": Corruption("commits", "output_tokens", -1),
        "cost text": _loose("commits", "cost", "free"),
        "cost negative": Corruption("commits", "cost", -0.5),
        "cost infinite": Corruption("commits", "cost", math.inf),
        "run record not JSON": Corruption("runs", "record", "{not json"),
        "run record not a record": Corruption("runs", "record", "[]"),
    }
)
