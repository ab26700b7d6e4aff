"""From a dataset's row to a task: the field mapping (or a function), and stable ids."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .._errors import ConfigError
from .._ids import check_id
from .._json import MAX_DEPTH, dumps
from .._suggest import did_you_mean
from .._types import BenchmarkTaskMetadata

#: A dataset's row: its fields by name.
Row = Mapping[str, Any]
#: A function of a row: a mapping with ``input`` (text, or the task's inputs as a
#: mapping), and optionally ``id``, ``target``, ``metadata``; None skips the row.
SampleFunction = Callable[[Row], Mapping[str, Any] | None]
#: A field's name, several names (each kept under its own), or {new name: field}.
FieldSpec = str | Sequence[str] | Mapping[str, str] | None

_UNSET: Any = object()


class Fields:
    """How each row becomes a task: ``id``, ``input``, ``target`` and ``metadata``
    name the row's fields (or ``sample`` maps a whole row), and every task gets
    ``agent_id``, ``environment_id`` and the other metadata given."""

    def __init__(
        self,
        sample: SampleFunction | None,
        *,
        id: str | None,
        input: FieldSpec,
        target: str | None,
        metadata: FieldSpec,
        task: Mapping[str, Any],
        defaulted: bool,
    ) -> None:
        if sample is not None and not callable(sample):
            raise ConfigError(f"a dataset's sample must be a function of a row, not {sample!r}")
        if sample is not None and not defaulted:
            raise ConfigError(
                "give a dataset either a sample function or the fields id=, input=, "
                "target=, metadata=, not both"
            )
        for name, value in (("id", id), ("target", target)):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{name} must name a field (a string) or be None, not {value!r}")
        _check_spec("input", input)
        _check_spec("metadata", metadata)
        self.sample = sample
        self.id = id
        self.input = input
        self.target = target
        self.metadata = metadata
        try:
            self.base = BenchmarkTaskMetadata(**task)
        except TypeError as exc:
            raise ConfigError(f"dataset task settings: {exc}") from None
        self._seen: dict[str, int] = {}

    def tasks(self, rows: Iterable[tuple[str, Row]]) -> Iterator[tuple[str, dict[str, Any]]]:
        """Each row as a task line, with where it was read (for messages)."""
        ids: set[str] = set()  # a repeat is named by the dataset's row, not the spool's line
        for where, row in rows:
            if not isinstance(row, Mapping):
                raise ConfigError(f"{where}: expected a record of fields, not {row!r}")
            line = self._line(where, row)
            if line is not None:
                if line["id"] in ids:
                    raise ConfigError(f"{where}: task id {line['id']!r} repeats")
                ids.add(line["id"])
                yield where, line

    def _line(self, where: str, row: Row) -> dict[str, Any] | None:
        if self.sample is not None:
            mapped = self.sample(row)
            if mapped is None:
                return None
            if not isinstance(mapped, Mapping):
                raise ConfigError(
                    f"{where}: the sample function returned {mapped!r}, not a mapping or None"
                )
            unknown = sorted(set(mapped) - {"id", "input", "target", "metadata"})
            if unknown:
                raise ConfigError(
                    f"{where}: the sample function returned unknown key(s) "
                    f"{', '.join(map(repr, unknown))} (expected id, input, target, metadata)"
                )
            if "input" not in mapped:  # else every prompt would be None, silently
                raise ConfigError(
                    f"{where}: the sample function returned no 'input' (the prompt, or the "
                    "task's inputs as a mapping: {} for none)"
                )
            task_id = mapped.get("id")
            raw_input = mapped["input"]
            # By name, as the objects in them: a function may take them from the row in
            # its file's order (every field but the answer), and the line must not change.
            inputs = (
                _by_name(raw_input, 1) if isinstance(raw_input, Mapping) else {"prompt": raw_input}
            )
            target = mapped.get("target")
            metadata = mapped.get("metadata") or {}
            if not isinstance(metadata, Mapping):
                raise ConfigError(f"{where}: metadata must be a mapping, not {metadata!r}")
            metadata = _by_name(metadata, 1)
        else:
            task_id = None if self.id is None else _field(row, self.id, where)
            if self.id is not None and task_id is None:
                raise ConfigError(
                    f"{where}: field {self.id!r} (the task id) is null: give every row an id, "
                    "or id=None for ids made from each row's content"
                )
            inputs = _picked(row, self.input, where, single="prompt")
            if isinstance(self.input, str) and inputs["prompt"] is None:
                # Hugging Face gives a row None for each field another row has: a prompt
                # of None would send the model no question, silently.
                raise ConfigError(
                    f"{where}: field {self.input!r} (the prompt) is null: give every row "
                    "one, or skip such rows with a sample function"
                )
            target = None if self.target is None else _field(row, self.target, where)
            metadata = _picked(row, self.metadata, where)
        if task_id is None:
            task_id = self._stable_id(row)
        elif isinstance(task_id, int) and not isinstance(task_id, bool):
            task_id = str(task_id)
        elif not isinstance(task_id, str):
            raise ConfigError(f"{where}: the id {task_id!r} is not a string or an integer")
        try:
            check_id("task id", task_id)
        except ConfigError as exc:  # here, where the row's line is known
            raise ConfigError(f"{where}: {exc}") from None
        line: dict[str, Any] = {
            "id": task_id,
            "agent_id": self.base.agent_id,
            "environment_id": self.base.environment_id,
            "model": self.base.model,
            "max_iterations": self.base.max_iterations,
            # A value's objects ordered by key: a streamed task is stored as its line's
            # digest, which must not change when the dataset's file orders them anew.
            "inputs": {name: _by_name(value) for name, value in inputs.items()},
        }
        if target is not None:
            line["target"] = _by_name(target)
        if metadata:
            line["metadata"] = {name: _by_name(value) for name, value in metadata.items()}
        for name in ("token_limit", "cost_limit", "working_time_limit"):
            if getattr(self.base, name) is not None:
                line[name] = getattr(self.base, name)
        return line

    def _stable_id(self, row: Row) -> str:
        """An id from the row's content: the same row has the same id in every run and
        at every position; a repeated row gets ``~2``, ``~3``, ... The fields are hashed
        in order of their names, at every level: not in the order a file wrote them (a
        re-export may sort them; Hugging Face gives each row the first row's order). A
        field whose value is null counts as absent: Hugging Face gives a row ``None`` for
        each field another row has, so a row added with a new field changed every id."""
        fields = _by_name(row, null_fields=False)
        try:
            text = dumps(fields)
        except (TypeError, ValueError):  # a value JSON cannot write (NaN, bytes): its repr
            text = repr(list(fields.items()))
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
        count = self._seen.get(digest, 0) + 1
        self._seen[digest] = count
        return digest if count == 1 else f"{digest}~{count}"


def _by_name(value: Any, depth: int = MAX_DEPTH, *, null_fields: bool = True) -> Any:
    """``value`` with every mapping in it ordered by its keys (without its null fields
    unless ``null_fields``), down to `MAX_DEPTH` levels (a task's value nested deeper
    is refused, naming where)."""
    if depth <= 0:
        return value
    if isinstance(value, Mapping):
        return {
            k: _by_name(value[k], depth - 1, null_fields=null_fields)
            for k in sorted(value, key=str)
            if null_fields or value[k] is not None
        }
    if isinstance(value, (list, tuple)):
        return [_by_name(item, depth - 1, null_fields=null_fields) for item in value]
    return value


def _check_spec(name: str, spec: object) -> None:
    if spec is None or isinstance(spec, str):
        return
    if isinstance(spec, Mapping):
        if all(isinstance(k, str) and isinstance(v, str) for k, v in spec.items()):
            return
    elif isinstance(spec, Sequence) and all(isinstance(v, str) for v in spec):
        return
    raise ConfigError(
        f"{name} must name a field, list fields, or map names to fields, not {spec!r}"
    )


def _field(row: Row, name: str, where: str) -> Any:
    try:
        return row[name]
    except KeyError:
        # The first fields listed, and (a wide row's meant one may be past them) the
        # close matches among all.
        fields = ", ".join(map(repr, list(row)[:20]))
        hint = did_you_mean(name, row)
        raise ConfigError(f"{where}: no field {name!r} (its fields: {fields}){hint}") from None


def _picked(row: Row, spec: FieldSpec, where: str, single: str | None = None) -> dict[str, Any]:
    """The fields ``spec`` names, as a task's inputs or metadata."""
    if spec is None:
        return {}
    if isinstance(spec, str):
        return {single or spec: _field(row, spec, where)}
    if isinstance(spec, Mapping):
        return {new: _field(row, old, where) for new, old in spec.items()}
    return {name: _field(row, name, where) for name in spec}
