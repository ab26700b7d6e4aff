"""`TaskSource`: tasks streamed from JSONL, an iterable or an async iterable.

A benchmark of a million tasks never holds them all: the source keeps a compact
index (each task's id and where its line starts) and parses a task's metadata,
inputs included, only when it is needed, with a small cache. Iterables are
spooled to a JSONL file first, so every source reads the same way.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import weakref
from array import array
from collections import OrderedDict
from collections.abc import AsyncIterable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from ._budget import BUDGET_NAMES
from ._checks import file_path
from ._errors import ConfigError, NotSerializableError
from ._json import check_json, dumps, loads, short_repr
from ._metadata import check_metadata
from ._suggest import did_you_mean
from ._types import BenchmarkTaskMetadata

_FIELDS = (
    "agent_id",
    "environment_id",
    "model",
    "max_iterations",
    "dependencies",
    "inputs",
    *BUDGET_NAMES,
    "target",
    "metadata",
)
_CACHE = 1024


class TaskSource(Mapping[str, BenchmarkTaskMetadata]):
    """A read-only mapping of task id to metadata, read on demand from a JSONL file.

    Each line is one task: ``{"id": "t1", "agent_id": "...", "environment_id":
    "...", "model": "...", "max_iterations": 10, "dependencies": [...],
    "inputs": {...}}`` (``id``, ``agent_id`` and ``environment_id`` required;
    ``token_limit``, ``cost_limit``, ``working_time_limit``, ``target`` and
    ``metadata`` optional).
    Every line is validated when the source is built; a malformed one is a
    `ConfigError` naming the file and line number. Reading a task later checks
    that its line is still the one indexed: a file changed under a running
    source is a `ConfigError`, never another task's inputs. Pass a source
    wherever a ``tasks`` mapping goes (`CorralRunner`, `Benchmark`).
    """

    def __init__(self, path: str | os.PathLike[str], *, _spooled: bool = False) -> None:
        self.path = file_path("path", path)
        # A spooled file is a temporary the user never saw: its lines are the items given.
        self._spooled = _spooled
        self._ids: list[str] = []
        self._positions: dict[str, int] = {}
        self._offsets = array("q")
        self._lines = array("I")  # each task's line number, for messages
        self._size = 0  # the file's length when indexed: where the last task's line ends
        # Each task without its inputs (the part planning needs), and its inputs' digest.
        self._skeletons: list[BenchmarkTaskMetadata] = []
        self._input_digests = bytearray()  # 16 bytes a task
        # One copy of each name and of each distinct skeleton: most tasks share theirs.
        self._names: dict[str, str] = {}
        self._shared: dict[tuple[Any, ...], BenchmarkTaskMetadata] = {}
        self._digest = hashlib.sha256()
        self._cache: OrderedDict[str, BenchmarkTaskMetadata] = OrderedDict()
        self._file: IO[bytes] | None = None
        self._index()
        if _spooled:  # the spool file goes with the source
            weakref.finalize(self, _remove, str(self.path))

    # -- building --------------------------------------------------------------

    @classmethod
    def jsonl(cls, path: str | os.PathLike[str]) -> TaskSource:
        """Tasks from a JSONL file, one task per line."""
        return cls(path)

    @classmethod
    def from_iterable(
        cls,
        tasks: Iterable[tuple[str, BenchmarkTaskMetadata] | Mapping[str, Any]],
        *,
        spool_dir: str | os.PathLike[str] | None = None,
    ) -> TaskSource:
        """Tasks from an iterable of ``(task_id, metadata)`` pairs or JSONL-shaped dicts,
        consumed once and spooled to a temporary JSONL file."""
        with _Spool(spool_dir) as spool:
            for item in tasks:
                spool.write(item)
        return cls._of_spool(spool)

    @classmethod
    def _of_spool(cls, spool: _Spool) -> TaskSource:
        try:
            return cls(spool.path, _spooled=True)
        except BaseException:  # refused: the spool file has no source to go with
            _remove(str(spool.path))
            raise

    @classmethod
    async def from_async_iterable(
        cls,
        tasks: AsyncIterable[tuple[str, BenchmarkTaskMetadata] | Mapping[str, Any]],
        *,
        spool_dir: str | os.PathLike[str] | None = None,
    ) -> TaskSource:
        """Like `from_iterable`, for an async iterable (a paged API, a database cursor)."""
        with _Spool(spool_dir) as spool:
            async for item in tasks:
                spool.write(item)
        return cls._of_spool(spool)

    def _where(self, number: int) -> str:
        """Line ``number`` of the file, for messages: a spooled file's line N is item N."""
        return f"task source item {number}" if self._spooled else f"{self.path}:{number}"

    def _index(self) -> None:
        try:
            handle = open(self.path, "rb")
        except OSError as exc:
            raise ConfigError(f"task file {str(self.path)!r} cannot be read: {exc}") from None
        with handle:
            offset = 0
            for number, raw in enumerate(handle, start=1):
                line = raw.strip()
                if line:
                    where = self._where(number)
                    task_id, meta = _parse(line, where)
                    if task_id in self._positions:
                        raise ConfigError(f"{where}: task id {task_id!r} repeats")
                    self._positions[task_id] = len(self._ids)
                    self._ids.append(task_id)
                    self._offsets.append(offset)
                    self._lines.append(number)
                    self._skeletons.append(self._skeleton(meta))
                    # The line's digest stands for the task's inputs in the stored
                    # configuration: the same file resumes, an edited task is refused.
                    # Reading the task later checks it too.
                    self._input_digests += _line_digest(line)
                    self._digest.update(line + b"\n")
                offset += len(raw)
            self._size = offset

    def _skeleton(self, meta: BenchmarkTaskMetadata) -> BenchmarkTaskMetadata:
        key = (
            meta.agent_id,
            meta.environment_id,
            meta.model,
            meta.max_iterations,
            meta.dependencies,
        )
        shared = self._shared.get(key)
        if shared is not None:
            return shared
        skeleton = BenchmarkTaskMetadata(
            agent_id=self._names.setdefault(meta.agent_id, meta.agent_id),
            environment_id=self._names.setdefault(meta.environment_id, meta.environment_id),
            model=None if meta.model is None else self._names.setdefault(meta.model, meta.model),
            max_iterations=meta.max_iterations,
            dependencies=meta.dependencies,
        )
        if not meta.dependencies:  # tasks with parents rarely share them all
            self._shared[key] = skeleton
        return skeleton

    # -- reading ---------------------------------------------------------------

    def skeleton(self, task_id: str) -> BenchmarkTaskMetadata:
        """The task's metadata without its inputs: read from memory, no parsing."""
        return self._skeletons[self._positions[task_id]]

    def skeletons(self) -> Mapping[str, BenchmarkTaskMetadata]:
        """The same tasks without their inputs, as a mapping (planning never parses)."""
        return _SkeletonView(self)

    def inputs_digest(self, task_id: str) -> dict[str, str]:
        """What a stored configuration keeps of the task's inputs: its line's digest."""
        at = 16 * self._positions[task_id]
        return {"sha256": self._input_digests[at : at + 16].hex()}

    def __getitem__(self, task_id: str) -> BenchmarkTaskMetadata:
        meta = self._cache.get(task_id)
        if meta is not None:
            self._cache.move_to_end(task_id)
            return meta
        position = self._positions[task_id]
        where = self._where(self._lines[position])
        start = self._offsets[position]
        end = self._offsets[position + 1] if position + 1 < len(self._ids) else self._size
        try:
            if self._file is None:
                # Unbuffered: a buffer would serve bytes read before the file changed.
                self._file = open(self.path, "rb", buffering=0)
            self._file.seek(start)
            # Up to the next task's line: this line and any blank lines after it.
            line = self._file.read(end - start).strip()
        except OSError as exc:
            raise ConfigError(f"{where}: task {task_id!r} cannot be read: {exc}") from None
        # The file may have been edited since it was indexed: whatever now sits at
        # this offset must be the very line indexed, never another task's inputs.
        at = 16 * position
        if _line_digest(line) != self._input_digests[at : at + 16]:
            raise ConfigError(
                f"{where}: the task file changed after the TaskSource read it; this line "
                f"no longer holds task {task_id!r} as indexed (restore the file, or build "
                "a new TaskSource)"
            )
        _, meta = _parse(line, where)
        self._cache[task_id] = meta
        if len(self._cache) > _CACHE:
            self._cache.popitem(last=False)
        return meta

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._positions

    def __repr__(self) -> str:
        return f"TaskSource({str(self.path)!r}, {len(self)} tasks)"

    @property
    def sha256(self) -> str:
        """A digest of every task line, in order: changes when any task changes."""
        return self._digest.hexdigest()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class _SkeletonView(TaskSource):
    """A source's index seen through `TaskSource.skeleton`: ids, order and membership
    are the source's own; only reading a task differs."""

    def __init__(self, source: TaskSource) -> None:  # shares the index, reads nothing
        self.path = source.path
        self._ids = source._ids
        self._positions = source._positions
        self._skeletons = source._skeletons

    def __getitem__(self, task_id: str) -> BenchmarkTaskMetadata:
        return self._skeletons[self._positions[task_id]]


def _line_digest(line: bytes) -> bytes:
    return hashlib.sha256(line).digest()[:16]


def _parse(line: bytes, where: str) -> tuple[str, BenchmarkTaskMetadata]:
    try:
        data = loads(line)
    except ValueError as exc:
        raise ConfigError(f"{where}: not a JSON object ({exc})") from None
    except RecursionError:  # the stdlib decoder recurses once a level
        raise ConfigError(f"{where}: nested too deeply to read") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{where}: expected a JSON object per line, not {data!r}")
    task_id = data.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise ConfigError(f"{where}: 'id' must be a non-empty string, not {task_id!r}")
    unknown = sorted(set(data) - {"id", *_FIELDS})
    if len(unknown) == 1:  # one typo, most likely: with the field it meant
        hint = did_you_mean(unknown[0], ("id", *_FIELDS))
        raise ConfigError(f"{where}: unknown field {unknown[0]!r}{hint}")
    if unknown:
        raise ConfigError(f"{where}: unknown fields {', '.join(map(repr, unknown))}")
    fields = {name: data[name] for name in _FIELDS if name in data}
    if isinstance(fields.get("dependencies"), list):
        fields["dependencies"] = tuple(fields["dependencies"])
    try:
        meta = BenchmarkTaskMetadata(**fields)
    except TypeError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    try:
        check_metadata(task_id, meta)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return task_id, meta


class _Spool:
    """A temporary JSONL file that iterables are written to, one task per line."""

    def __init__(self, directory: str | os.PathLike[str] | None) -> None:
        if directory is not None:
            file_path("spool_dir", directory)
        try:
            handle, name = tempfile.mkstemp(prefix="corral-tasks-", suffix=".jsonl", dir=directory)
        except OSError as exc:
            raise ConfigError(
                f"spool_dir {str(directory)!r} cannot hold a task file: {exc}"
            ) from None
        self.path = Path(name)
        self._file = os.fdopen(handle, "w", encoding="utf-8")
        self._count = 0

    def __enter__(self) -> _Spool:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        self._file.close()
        if exc is not None:
            _remove(str(self.path))

    def write(
        self, item: tuple[str, BenchmarkTaskMetadata] | Mapping[str, Any], where: str = ""
    ) -> None:
        """Add ``item``; a refusal names it by ``where`` (a dataset's file and line), or
        else by its number."""
        self._count += 1
        where = where or f"task source item {self._count}"
        if isinstance(item, Mapping):
            row = dict(item)
        elif isinstance(item, tuple) and len(item) == 2:
            task_id, meta = item
            if not isinstance(meta, BenchmarkTaskMetadata):
                raise ConfigError(
                    f"{where}: expected BenchmarkTaskMetadata, not {type(meta).__name__}"
                )
            row = {"id": task_id, **_as_row(meta)}
        else:
            raise ConfigError(f"{where}: expected (task_id, metadata) or a dict, not {item!r}")
        if isinstance(row.get("id"), str):
            where += f" (task {short_repr(row['id'])})"
        try:
            self._file.write(dumps(check_json(row, where)) + "\n")
        except NotSerializableError as exc:
            raise ConfigError(str(exc)) from None


def _as_row(meta: BenchmarkTaskMetadata) -> dict[str, Any]:
    return {
        "agent_id": meta.agent_id,
        "environment_id": meta.environment_id,
        "model": meta.model,
        "max_iterations": meta.max_iterations,
        "dependencies": list(meta.dependencies),
        "inputs": dict(meta.inputs),
        **{n: getattr(meta, n) for n in BUDGET_NAMES if getattr(meta, n) is not None},
        **sample_fields(meta),
    }


def sample_fields(meta: BenchmarkTaskMetadata) -> dict[str, Any]:
    """``meta``'s target and metadata as a task line or a stored configuration keeps
    them: absent when unset, so a task without them reads as it did before them."""
    out: dict[str, Any] = {}
    if meta.target is not None:
        out["target"] = meta.target
    if meta.metadata:
        out["metadata"] = dict(meta.metadata)
    return out


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
