"""A benchmark's stored configuration, typed: its trials per task and each task's metadata.

What a resumed run must match, as the store keeps it (JSON). The store checks
what it reads (``store/_decode.py``: ``trials_per_task`` an integer, each task an
object naming its environment, the known fields well typed); `StoredConfig.decode`
reads such an object, a missing field as its default; `encode` writes the keys
every earlier Corral wrote, in their order.

A run writes its configuration as a stream (`ConfigStream`: JSON text in pieces,
one task's entry at a time) and a store reads a stored one back the same way
(`StoredConfigText`): a hundred thousand tasks' metadata is never one dict.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

from .._json import dumps
from .._types import BenchmarkTaskMetadata


@dataclass(frozen=True, slots=True)
class StoredTask:
    """One task's metadata as stored (``inputs``: the task's inputs as JSON, or for a
    streamed source their digest)."""

    agent_id: str = ""
    environment_id: str = ""
    model: str | None = None
    max_iterations: int = 10
    dependencies: tuple[str, ...] = ()
    inputs: Any = None

    @classmethod
    def of(cls, meta: BenchmarkTaskMetadata, inputs: Any) -> StoredTask:
        """``meta`` as stored, with ``inputs`` (already as JSON will store them)."""
        return cls(
            meta.agent_id,
            meta.environment_id,
            meta.model,
            meta.max_iterations,
            tuple(meta.dependencies),
            inputs,
        )

    @classmethod
    def decode(cls, entry: Mapping[str, Any]) -> StoredTask:
        get = entry.get
        return cls(
            get("agent_id", ""),
            get("environment_id", ""),
            get("model"),
            get("max_iterations", 10),
            tuple(get("dependencies", ())),
            get("inputs"),
        )

    def encode(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "environment_id": self.environment_id,
            "model": self.model,
            "max_iterations": self.max_iterations,
            "dependencies": list(self.dependencies),
            "inputs": self.inputs,
        }

    def metadata(self) -> BenchmarkTaskMetadata:
        """The task's metadata without its dependencies and inputs (what a rescore plans)."""
        return BenchmarkTaskMetadata(
            self.agent_id, self.environment_id, self.model, self.max_iterations
        )


class StoredTasks(Mapping[str, StoredTask]):
    """A stored configuration's tasks by id, each decoded when first asked for (a
    command that counts a million tasks builds no object per task)."""

    __slots__ = ("_entries", "_decoded")

    def __init__(self, entries: Mapping[str, Mapping[str, Any]]) -> None:
        self._entries = entries
        self._decoded: dict[str, StoredTask] = {}

    def __getitem__(self, task_id: str) -> StoredTask:
        task = self._decoded.get(task_id)
        if task is None:
            task = self._decoded[task_id] = StoredTask.decode(self._entries[task_id])
        return task

    def __contains__(self, task_id: object) -> bool:
        return task_id in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def stored(self, task_id: str) -> Mapping[str, Any]:
        """``task_id``'s entry as stored (what a resumed run's must equal)."""
        return self._entries[task_id]


@dataclass(frozen=True, slots=True)
class StoredConfig:
    """A benchmark's configuration: its trials per task and its tasks' metadata."""

    trials_per_task: int
    tasks: Mapping[str, StoredTask]

    @classmethod
    def decode(cls, config: Mapping[str, Any]) -> StoredConfig:
        """A configuration as a store returns it (checked by the store)."""
        return cls(int(config.get("trials_per_task", 0)), StoredTasks(config.get("tasks", {})))

    def entry(self, task_id: str) -> Mapping[str, Any]:
        """``task_id``'s metadata as stored (what ``corral show --json`` prints)."""
        tasks = self.tasks
        return tasks.stored(task_id) if isinstance(tasks, StoredTasks) else tasks[task_id].encode()

    def encode(self) -> dict[str, Any]:
        """The configuration as stored."""
        tasks = self.tasks
        if isinstance(tasks, StoredTasks):
            entries = {t: dict(tasks.stored(t)) for t in tasks}
        else:
            entries = {t: task.encode() for t, task in tasks.items()}
        return {"trials_per_task": self.trials_per_task, "tasks": entries}


#: What a stream writes or reads at a time: about this many characters of JSON.
PIECE = 1 << 16


#: Tasks encoded at once: one ``dumps`` of a batch costs about what one of a task does
#: (a run registering 40,000 tasks spent half its registration in two calls a task).
_BATCH = 64


def _members(entries: list[tuple[str, Mapping[str, Any]]]) -> str:
    """The members ``"task_id":entry`` of a JSON object, comma-separated, as ``dumps``
    writes them: one ``dumps`` of the batch as a dict, its braces cut off. Task ids
    repeated (which a dict would merge) are written one by one, each as given."""
    members = dict(entries)
    if len(members) == len(entries):
        return dumps(members)[1:-1]
    return ",".join(f"{dumps(task_id)}:{dumps(entry)}" for task_id, entry in entries)


class ConfigStream:
    """A configuration to store, produced one task at a time: its text is written in
    pieces of about `PIECE` characters and compared with a stored one task by task.

    ``tasks`` returns a fresh iterator of ``(task_id, entry)`` on each call, each entry
    as JSON will store it (what `StoredTask.encode` writes, plus ``target`` and
    ``metadata`` when set).
    """

    __slots__ = ("trials_per_task", "_tasks", "_whole")

    def __init__(
        self,
        trials_per_task: int,
        tasks: Callable[[], Iterable[tuple[str, Mapping[str, Any]]]],
    ) -> None:
        self.trials_per_task = trials_per_task
        self._tasks = tasks
        self._whole: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, config: Mapping[str, Any] | ConfigStream) -> ConfigStream:
        """``config`` as a stream; a configuration given whole (a copy's, a test's) is
        written as it is, any other key kept."""
        if isinstance(config, ConfigStream):
            return config
        tasks: Mapping[str, Any] = config.get("tasks", {})
        stream = cls(config.get("trials_per_task", 0), tasks.items)
        stream._whole = config
        return stream

    @property
    def whole(self) -> Mapping[str, Any] | None:
        """The configuration given whole (`of`), written as it is; None for a stream."""
        return self._whole

    def tasks(self) -> Iterator[tuple[str, Mapping[str, Any]]]:
        return iter(self._tasks())

    def text(
        self, observe: Callable[[list[tuple[str, Mapping[str, Any]]]], None] | None = None
    ) -> Iterator[str]:
        """The configuration's JSON text (what ``dumps`` of it writes), in pieces;
        ``observe`` is given each batch of ``(task_id, entry)`` as it is written (what
        a store counts of them)."""
        if self._whole is not None:
            yield dumps(dict(self._whole))
            return
        batch = [f'{{"trials_per_task":{dumps(self.trials_per_task)},"tasks":{{']
        size = len(batch[0])
        comma = ""
        tasks = self.tasks()
        while entries := list(islice(tasks, _BATCH)):
            if observe is not None:
                observe(entries)
            piece = comma + _members(entries)
            comma = ","
            batch.append(piece)
            size += len(piece)
            if size >= PIECE:
                yield "".join(batch)
                batch.clear()
                size = 0
        batch.append("}}")
        yield "".join(batch)

    def as_dict(self) -> dict[str, Any]:
        """The whole configuration (what an error message or an in-memory store needs)."""
        if self._whole is not None:
            return dict(self._whole)
        return {"trials_per_task": self.trials_per_task, "tasks": dict(self.tasks())}


class StoredConfigText:
    """A stored configuration read from its JSON text in pieces: `tasks` yields each
    task's entry as it is reached and keeps none; the other top-level keys
    (``trials_per_task``) are in `header` once `tasks` is exhausted.

    Text that is not such an object raises `ValueError` saying why.
    """

    def __init__(self, pieces: Iterable[str]) -> None:
        self._pieces = iter(pieces)
        self._text = ""
        self._at = 0
        self._ended = False
        self._held: Mapping[str, Any] | None = None
        self.header: dict[str, Any] = {}
        #: Whether the configuration has a ``tasks`` object (read by `tasks`).
        self.has_tasks = False

    @classmethod
    def held(cls, config: Mapping[str, Any]) -> StoredConfigText:
        """A configuration held whole (an in-memory store's), read the same way."""
        read = cls(())
        read._held = config
        return read

    def tasks(self) -> Iterator[tuple[str, Any]]:
        if self._held is not None:
            tasks = self._held.get("tasks")
            self.header = {k: v for k, v in self._held.items() if k != "tasks"}
            self.has_tasks = isinstance(tasks, Mapping)
            if not self.has_tasks:
                self.header["tasks"] = tasks
                return
            yield from tasks.items()  # type: ignore[union-attr]
            return
        self._expect("{")
        if self._peek() == "}":
            self._at += 1
            self._check_end()
            return
        while True:
            key = self._value()
            if not isinstance(key, str):
                raise ValueError(f"expected a key, not {key!r}")
            self._expect(":")
            if key == "tasks" and self._peek() == "{":
                if self.has_tasks:  # JSON keeps the last; a reader of the first would not
                    raise ValueError("two tasks objects")
                self.has_tasks = True
                yield from self._entries()
            else:
                self.header[key] = self._value()
            if self._next_of(",}") == "}":
                self._check_end()
                return

    def _entries(self) -> Iterator[tuple[str, Any]]:
        self._expect("{")
        if self._peek() == "}":
            self._at += 1
            return
        while True:
            # As Corral writes it, ``"id":{...},`` within the piece at hand, read here
            # (a read of 100,000 tasks spends its time in these steps); anything else
            # (white space, a piece that ends inside) step by step below.
            text, at = self._text, self._at
            try:
                if text[at] != '"':
                    raise ValueError
                task_id, end = _scanstring(text, at + 1)
                if text[end] != ":":
                    raise ValueError
                entry, end = _DECODER.raw_decode(text, end + 1)
                char = text[end]
                if char != "," and char != "}":
                    raise ValueError
                self._at = end + 1
            except (ValueError, IndexError, RecursionError):
                task_id = self._value()
                if not isinstance(task_id, str):
                    raise ValueError(f"expected a task id, not {task_id!r}") from None
                self._expect(":")
                entry = self._value()
                char = self._next_of(",}")
            yield task_id, entry
            if char == "}":
                return

    # -- reading the text ---------------------------------------------------------

    def _more(self) -> bool:
        """Read the next piece; False at the end of the text."""
        piece = next(self._pieces, None)
        if piece is None:
            self._ended = True
            return False
        self._text = self._text[self._at :] + piece
        self._at = 0
        return True

    def _peek(self) -> str:
        """The next character that is not white space ("" at the end)."""
        while True:
            text, at = self._text, self._at
            while at < len(text) and text[at] in " \t\n\r":
                at += 1
            self._at = at
            if at < len(text):
                return text[at]
            if not self._more():
                return ""

    def _expect(self, char: str) -> None:
        if self._peek() != char:
            raise ValueError(f"expected {char!r} at {self._shown()}")
        self._at += 1

    def _next_of(self, chars: str) -> str:
        char = self._peek()
        if not char or char not in chars:
            raise ValueError(f"expected one of {chars!r} at {self._shown()}")
        self._at += 1
        return char

    def _value(self) -> Any:
        self._peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self._text, self._at)
            except json.JSONDecodeError as exc:
                if self._ended or not self._more():
                    raise ValueError(str(exc)) from None
                continue
            except RecursionError:
                raise ValueError("it is nested too deeply") from None
            # A number at the end of a piece may go on in the next one.
            if end == len(self._text) and not self._ended and self._more():
                continue
            self._at = end
            return value

    def _check_end(self) -> None:
        if self._peek():
            raise ValueError(f"extra data at {self._shown()}")

    def _shown(self) -> str:
        return repr(self._text[self._at : self._at + 20]) if self._at < len(self._text) else "end"


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


# Corral never writes NaN or Infinity (JSON has neither): one read back is damage.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
#: The decoder's own reader of a string (from just after its opening quote: the text
#: and where it ends).
_scanstring: Callable[[str, int], tuple[str, int]] = json.decoder.scanstring  # type: ignore[attr-defined]
