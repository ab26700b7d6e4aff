"""The report file: a JSON export of a benchmark's report, written where a run is asked
to (``report_file=``), by default beside a store that lives in a file.

The report itself lives in the store (run records); this file is a copy for
tools that read JSON, so every backend gives the same `corral report`.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shlex
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from .._errors import ConfigError, CorralError
from ..history import StoredConfig
from ..store import CommitStore, FileStore, MemoryStore
from ..store._heads import HeadStore, TaskList
from ..store._runs import RunRecord
from ..store._sqlite_file import is_store_file, same_path
from ._model import BenchmarkReport
from ._spool import RecordSpool
from ._stored import stored_report


def report_path(store: CommitStore, benchmark_id: str) -> Path | None:
    """Where a run's JSON report is written unless ``report_file`` says otherwise: beside
    a store that lives in a file (none for another store)."""
    if isinstance(store, FileStore):
        return store.path.parent / "reports" / report_file_name(benchmark_id)
    return None


_PLAIN_NAME = re.compile(r"[a-z0-9_-][a-z0-9._-]{0,99}")


def report_file_name(benchmark_id: str) -> str:
    """A file name for ``benchmark_id``'s report that no other id gets, on any file system.

    A plain id (lower-case ASCII letters, digits, ``._-``, at most 100) is its own
    name; any other id gets a readable prefix and a hash of the whole id after
    a ``~``, which no plain id has. Upper case counts as not plain (``Run`` and
    ``run`` are one file on a case-insensitive file system), but the prefix keeps
    it: the hash keeps the names apart, and the id stays readable.
    """
    if _PLAIN_NAME.fullmatch(benchmark_id):
        return f"{benchmark_id}.json"
    prefix = "".join(
        c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in benchmark_id
    )
    digest = hashlib.sha256(benchmark_id.encode("utf-8", "surrogatepass")).hexdigest()[:20]
    return f"{prefix[:60].lstrip('.')}~{digest}.json"


async def whole_report(
    store: CommitStore, record: RunRecord, report: BenchmarkReport
) -> BenchmarkReport:
    """The report of every task of ``report``'s benchmark: ``report`` itself, unless the
    run (or rescore) chose some tasks; then it is rebuilt from the store, so the report
    file never shrinks to a subset. The rebuilt one keeps what the run recorded of
    itself (tags, note, provenance, generation settings), as `corral report` shows."""
    config: Mapping[str, Any] | TaskList | None = None
    if isinstance(store, HeadStore):  # the task ids alone, not the configuration decoded
        config = await store.task_list(report.benchmark_id)
        if config is not None and _same_tasks((t for t, _, _ in config.tasks), report):
            return report
    if config is None:
        config = await store.benchmark_config(report.benchmark_id)
        if config is None or _same_tasks(StoredConfig.decode(config).tasks, report):
            return report
    whole = await stored_report(
        store,
        report.benchmark_id,
        config,
        k_values=report.k_values,
        added=record.added,
        resumed=report.resumed,
        timings=report.timings,
        stopped=report.stopped,
        budgets=report.budgets,
    )
    return replace(
        whole,
        tags=report.tags,
        note=report.note,
        provenance=report.provenance,
        generation=report.generation,
    )


def _same_tasks(task_ids: Iterable[str], report: BenchmarkReport) -> bool:
    """Whether ``task_ids`` are ``report``'s tasks (each once, as a configuration's)."""
    tasks, count = report.tasks, 0
    for task_id in task_ids:
        if task_id not in tasks:
            return False
        count += 1
    return count == len(tasks)


def check_report_file(report_file: object) -> Path | None:
    if report_file is None:
        return None
    if not isinstance(report_file, str | os.PathLike) or not os.fspath(report_file):
        raise ConfigError(f"report_file must be a file path, not {report_file!r}")
    path = Path(report_file)
    if path.is_dir():
        raise ConfigError(f"report_file {str(path)!r} is a directory, not a file")
    folder = _nearest_existing(path.parent)  # the rest made when the run writes there
    if not folder.is_dir():
        raise ConfigError(
            f"report file {str(path)!r}: its folder cannot be made "
            f"({str(folder)!r} is not a folder)"
        )
    return path


def check_writable(path: Path | None) -> None:
    """A `ConfigError` naming ``path`` unless the run can write its report there: checked
    before anything runs (the report is written last, when every trial is stored).

    The nearest folder of ``path`` that exists must take a new file: one is made there
    and removed again (permissions alone say nothing to root, and /proc, a read-only
    mount or a full inode table refuse even root); the folders between are made as the
    report is written, which the same permission allows. A device or a pipe that is
    there (``/dev/null``) is written into, not replaced: it must take writing itself.
    """
    if path is None:
        return
    folder = path.parent
    try:
        if path.is_dir():
            raise ConfigError(f"report file {str(path)!r} cannot be written: it is a folder")
        if path.exists() and not path.is_file():  # a device or a pipe: written into
            if os.access(path, os.W_OK):
                return
            raise ConfigError(f"report file {str(path)!r} cannot be written: permission denied")
        folder = _nearest_existing(folder)
        if not folder.is_dir():
            raise ConfigError(
                f"report file {str(path)!r} cannot be written: its folder cannot be made "
                f"({str(folder)!r} is not a folder)"
            )
        handle, probe = tempfile.mkstemp(prefix=".corral-probe-", dir=folder)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"report file {str(path)!r} cannot be written: {reason} ({str(folder)!r})"
        ) from None
    os.close(handle)
    os.unlink(probe)


def _nearest_existing(folder: Path) -> Path:
    """``folder``, or its nearest parent that is there. A link to nothing is there (a
    share not mounted): no folder can be made in its place, so it ends the walk, not
    the folder above it, which would take the probe the report then fails without."""
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    return folder


class ReportFileError(CorralError, OSError):
    """The report file could not be written at the end of a run (a full disk): the
    run's results are in the store, which gives the report again."""


def report_file_failed(
    path: Path, store: CommitStore, report: BenchmarkReport, exc: OSError
) -> ReportFileError:
    """The error of ``report``'s file failing at the end: it names the file (the system's
    words name only a path) and the command that writes it again from the store (with
    the run's k values: `corral report` has its own by default)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    message = f"report file {str(path)!r} could not be written ({reason}); "
    if isinstance(store, MemoryStore):
        return ReportFileError(message + "the run's results are in the memory store")
    # Its address as given (a password masked in its repr: not repeated here).
    where = shlex.quote(str(store.path)) if isinstance(store, FileStore) else "ADDRESS"
    ks = "".join(f" -k {k}" for k in report.k_values)
    return ReportFileError(
        message + f"the run's results are in the store ({store!r}): `corral report "
        f"{shlex.quote(report.benchmark_id)} --store {where}{ks} --output "
        f"{shlex.quote(str(path))}` writes it again"
    )


def check_not_overwriting(
    report_file: Path | None, store: CommitStore, source: str | os.PathLike[str] | None = None
) -> None:
    """A `ConfigError` if ``report_file`` is a file the run reads: the store's own (or one
    SQLite keeps beside it) or the benchmark's file ``source``; the report would replace
    it (every benchmark of the store, or the benchmark's code)."""
    if report_file is None:
        return
    if isinstance(store, FileStore) and is_store_file(store.path, report_file):
        raise ConfigError(
            f"report_file {str(report_file)!r} is the store's own file: the report "
            "would replace the store; give another file (report.json)"
        )
    if source is not None and same_path(report_file, Path(source)):
        raise ConfigError(
            f"report_file {str(report_file)!r} is the benchmark's own file: the report "
            "would replace it; give another file (report.json)"
        )


def write_report(path: Path, report: BenchmarkReport, spool: RecordSpool | None = None) -> None:
    """Write ``report`` as JSON to ``path`` (whole or not at all: a device or a pipe is
    written into); the trial records ``spool`` holds are taken from it rather than
    read again."""
    trial_texts = None if spool is None else spool.texts
    if path.exists() and not path.is_file():  # a device or a pipe (/dev/null): not replaced
        with open(path, "w", encoding="utf-8") as f:
            report.write_json(f, trial_texts=trial_texts)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    # A name of its own beside ``path`` (``a.json`` and ``a.txt`` written at once by two
    # runs took one ``a.json.tmp``), made afresh ("x": the umask's permissions, as the
    # report's own), gone if the writing fails.
    tmp = path.parent / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            report.write_json(f, trial_texts=trial_texts)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
