"""`from_jsonl`, `from_csv`, `from_hf`: a dataset read row by row into a `TaskSource`
(spooled to its task file as it is read, so memory stays bounded)."""

from __future__ import annotations

import csv
import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from .._checks import file_path
from .._errors import ConfigError
from .._sources import TaskSource, _Spool
from ._fields import Fields, FieldSpec, Row, SampleFunction


def from_jsonl(
    path: str | os.PathLike[str],
    sample: SampleFunction | None = None,
    *,
    agent_id: str,
    environment_id: str,
    id: str | None = "id",
    input: FieldSpec = "input",
    target: str | None = "target",
    metadata: FieldSpec = None,
    spool_dir: str | os.PathLike[str] | None = None,
    **task: Any,
) -> TaskSource:
    """Tasks from a JSONL file, one record a line.

    ``id``, ``input``, ``target`` and ``metadata`` name each record's fields: ``id``
    its task id (None: an id from the record's content, the same in every run),
    ``input`` the prompt (``inputs["prompt"]``; a list of fields keeps each under
    its name, a mapping renames them), ``target`` what scorers compare with (None:
    no target), ``metadata`` the fields kept for the scorer. Or ``sample``, a
    function of the record returning ``{"id", "input", "target", "metadata"}``
    (or None to skip it). Every task gets ``agent_id``, ``environment_id`` and any
    other `BenchmarkTaskMetadata` field given (``model=``, ``max_iterations=``,
    budgets).
    """
    fields = _fields(sample, id, input, target, metadata, agent_id, environment_id, task)
    return _source(fields, _jsonl_rows(file_path("path", path)), spool_dir)


def from_csv(
    path: str | os.PathLike[str],
    sample: SampleFunction | None = None,
    *,
    agent_id: str,
    environment_id: str,
    id: str | None = "id",
    input: FieldSpec = "input",
    target: str | None = "target",
    metadata: FieldSpec = None,
    delimiter: str = ",",
    spool_dir: str | os.PathLike[str] | None = None,
    **task: Any,
) -> TaskSource:
    """Tasks from a CSV file with a header row, as `from_jsonl` (every value is text)."""
    fields = _fields(sample, id, input, target, metadata, agent_id, environment_id, task)
    return _source(fields, _csv_rows(file_path("path", path), delimiter), spool_dir)


def from_hf(
    path: str,
    sample: SampleFunction | None = None,
    *,
    agent_id: str,
    environment_id: str,
    split: str = "test",
    name: str | None = None,
    id: str | None = "id",
    input: FieldSpec = "input",
    target: str | None = "target",
    metadata: FieldSpec = None,
    load_options: Mapping[str, Any] | None = None,
    spool_dir: str | os.PathLike[str] | None = None,
    **task: Any,
) -> TaskSource:
    """Tasks from a Hugging Face dataset (``pip install 'corral[hf]'``), as
    `from_jsonl`: ``datasets.load_dataset(path, name, split=split, streaming=True,
    **load_options)`` read row by row (``from_hf("json", data_files=...)`` reads
    local files through the library: pass ``load_options={"data_files": ...}``)."""
    fields = _fields(sample, id, input, target, metadata, agent_id, environment_id, task)
    try:
        import datasets  # type: ignore[import-not-found,import-untyped,unused-ignore]
    except ImportError:
        raise ConfigError(
            "from_hf needs the Hugging Face datasets package: pip install 'corral[hf]'"
        ) from None
    options = {"streaming": True, **(load_options or {})}
    try:
        rows = datasets.load_dataset(path, name, split=split, **options)
    except Exception as exc:  # the library's own errors: a missing dataset, split, file
        raise ConfigError(
            f"Hugging Face dataset {path!r} (split {split!r}) cannot be loaded: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    where = f"{path}[{split}]"
    return _source(fields, ((f"{where} row {n}", row) for n, row in enumerate(rows)), spool_dir)


def _fields(
    sample: SampleFunction | None,
    id: str | None,
    input: FieldSpec,
    target: str | None,
    metadata: FieldSpec,
    agent_id: str,
    environment_id: str,
    task: Mapping[str, Any],
) -> Fields:
    defaulted = (id, input, target, metadata) == ("id", "input", "target", None)
    unknown = sorted(set(task) - _TASK_FIELDS)
    if unknown:
        raise ConfigError(
            f"unknown dataset argument(s) {', '.join(map(repr, unknown))}; tasks take "
            f"{', '.join(sorted(_TASK_FIELDS))}"
        )
    return Fields(
        sample,
        id=id,
        input=input,
        target=target,
        metadata=metadata,
        task={"agent_id": agent_id, "environment_id": environment_id, **task},
        defaulted=defaulted,
    )


_TASK_FIELDS = frozenset(
    {"model", "max_iterations", "token_limit", "cost_limit", "working_time_limit"}
)


def _source(
    fields: Fields,
    rows: Iterator[tuple[str, Row]],
    spool_dir: str | os.PathLike[str] | None,
) -> TaskSource:
    """The rows' tasks, spooled as `TaskSource.from_iterable` spools them, but a row the
    task file refuses is named by its dataset's file and line (the spool's item number
    is not the line: blank lines and skipped rows are not items)."""
    with _Spool(spool_dir) as spool:
        for where, line in fields.tasks(rows):
            spool.write(line, where)
    return TaskSource._of_spool(spool)


def _opened(path: Path, **options: Any) -> Any:
    """``path`` opened as UTF-8 text; a byte order mark (Excel's "CSV UTF-8" starts
    with one) is not part of the first field."""
    try:
        return open(path, encoding="utf-8-sig", errors="surrogateescape", **options)
    except OSError as exc:
        raise ConfigError(f"dataset {str(path)!r} cannot be read: {exc}") from None


#: What decoding with ``surrogateescape`` makes of a byte that is not UTF-8.
_NOT_UTF8 = re.compile("[\udc80-\udcff]")


def _lines(path: Path, **options: Any) -> Iterator[str]:
    """The file's lines as text. A byte that is not UTF-8 is a `ConfigError` naming its
    line: a strict decoder raises a UnicodeDecodeError for a block of the file, which
    names neither the file nor the line."""
    with _opened(path, **options) as handle:
        for number, line in enumerate(handle, start=1):
            bad = _NOT_UTF8.search(line)
            if bad is not None:
                byte = ord(bad.group()) - 0xDC00
                raise ConfigError(
                    f"{path}:{number}: not UTF-8 text (byte 0x{byte:02x} at character "
                    f"{bad.start() + 1}): save the file as UTF-8"
                )
            yield line


def _jsonl_rows(path: Path) -> Iterator[tuple[str, Row]]:
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = _DECODER.decode(line)
        except _RepeatedKey as exc:
            raise ConfigError(
                f"{where}: key {exc.args[0]!r} appears twice in one object (which value is meant?)"
            ) from None
        except ValueError as exc:
            raise ConfigError(f"{where}: not a JSON object ({exc})") from None
        yield where, row


class _RepeatedKey(Exception):
    """A JSON object names one key twice (the stdlib would keep the last silently)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _RepeatedKey(key)
            seen.add(key)
    return found


#: Made once (`json.loads` with a hook makes a decoder per call).
_DECODER = json.JSONDecoder(object_pairs_hook=_unique_keys)


#: What `csv.DictReader` gives a field a short row has no value for.
_MISSING: Any = object()


def _csv_rows(path: Path, delimiter: str) -> Iterator[tuple[str, Row]]:
    if not isinstance(delimiter, str) or len(delimiter) != 1:
        raise ConfigError(f"delimiter must be one character, not {delimiter!r}")
    # Strict: a quote left open would otherwise run to the end of the file, every later
    # row silently part of its field.
    reader = csv.DictReader(
        _lines(path, newline=""), delimiter=delimiter, restval=_MISSING, strict=True
    )
    try:
        yield from _csv_records(path, reader)
    except csv.Error as exc:  # the module's own, which names no file or line
        hint = ": raise it with csv.field_size_limit(n)" if "field limit" in str(exc) else ""
        # The line the row reader stopped at (the DictReader's count is the last row's).
        line = reader.reader.line_num
        raise ConfigError(f"{path}:{line}: not valid CSV ({exc}){hint}") from None


def _csv_records(path: Path, reader: csv.DictReader[str]) -> Iterator[tuple[str, Row]]:
    _check_header(path, reader.fieldnames or (), reader.line_num)
    for row in reader:
        if _blank(row):  # a spreadsheet's empty rows (",,"), skipped as blank lines are
            continue
        if None in row:  # more values than the header names
            raise ConfigError(f"{path}:{reader.line_num}: more values than the header has fields")
        missing = [name for name, value in row.items() if value is _MISSING]
        if missing:  # fewer: the last fields would be None, a target silently gone
            raise ConfigError(
                f"{path}:{reader.line_num}: fewer values than the header has fields "
                f"(no {', '.join(map(repr, missing))})"
            )
        yield f"{path}:{reader.line_num}", row


def _blank(row: Mapping[Any, Any]) -> bool:
    """Whether every cell of ``row`` is empty or spaces (missing ones too)."""
    values = [value for name, value in row.items() if name is not None]
    values += row.get(None) or ()
    return all(value is _MISSING or not value.strip() for value in values)


def _check_header(path: Path, names: Sequence[str], line: int) -> None:
    """Refuse a header that names a field twice: a row would keep only the last of the
    two columns, the other's values silently gone. (Blank names are left alone: the
    empty columns a spreadsheet's export may end with.)"""
    seen: set[str] = set()
    for name in names:
        if name in seen and name.strip():
            raise ConfigError(f"{path}:{line}: the header names the field {name!r} twice")
        seen.add(name)
