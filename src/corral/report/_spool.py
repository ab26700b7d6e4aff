"""Each trial's record as the report file writes it, kept as the run finishes it.

The JSON report a run writes beside its store holds every finished trial's record.
Read back from the store after the last trial, they cost a run on one event loop
about a fifth of its wall time (40,000 ten-millisecond trials on SQLite: 4 s of 19,
the commits decoded and folded again into records the run had just made). A
`RecordSpool` keeps each record's JSON text as the run finishes the trial, in a
temporary file beside the report (not in memory: a run of 100,000 trials would hold
40 MB), with its place in two arrays a trial; the report file takes a task's texts
from it when it holds every finished trial of the task, and reads the others from
the store (trials an earlier run finished, or ended in a way the run does not spool).

What it holds is what the store holds: records of commits handed over (durable
before the report is written, or the run fails), and `corral report` reads the same
records from the store (a test compares the two files byte for byte). Only trials
this run started afresh are kept (the run says which): a trial continued or reopened
carries usage of earlier attempts, which the run's record sums in another order than
the store's fold (the same cost to the last digit but one). A disk that fills up
makes it give up, not the run: the report then reads every task from the store.
"""

from __future__ import annotations

import operator
import os
import tempfile
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from .._json import dumps_for_report
from .._types import TrialRecord
from ._lazy import Positions

#: The file's write buffer. With the default (8 KB: a dozen records) the run's event
#: loop made a system call every dozen trials, and each gave the GIL to the store's
#: writer thread and waited to have it back; at 1 MB, one every ~1,500 trials.
_BUFFER = 1 << 20

#: Tasks whose texts the report file reads at once (`RecordSpool._read_block`), if
#: they lie within twice their size and `_SLACK` bytes, and `_MOST` at most.
_BLOCK = 256
_SLACK = 1 << 16
_MOST = 1 << 22


class RecordSpool:
    """The JSON text of each trial record the run hands it (`add`), by (task, trial)."""

    def __init__(
        self, task_ids: Sequence[str], trials_per_task: int, directory: Path | None = None
    ) -> None:
        self._task_ids = task_ids
        self._n = trials_per_task
        size = len(task_ids) * trials_per_task
        # Where each trial's text starts in the file (-1: none) and its length in bytes.
        self._at = array("q", [-1]) * size
        self._length = array("q", [0]) * size
        # Beside the report (``directory``), whose disk must hold these texts anyway;
        # not in a /tmp that may be small, or memory. Nameless: gone with the process.
        # Made with the first record: a run refused before any trial writes nothing.
        self._directory = directory
        self._file: IO[bytes] | None = None
        self._end = 0
        self._flushed = True
        #: A write or read failed (a full disk): every task is read from the store.
        self._broken = False
        # Each task's place, at once when the report is read in the run's order.
        self._positions = Positions()
        # The texts of the tasks from ``_block_from`` to ``_block_to``, read at once
        # (`_read_block`), and where in the file they start.
        self._block = ""
        self._block_at = 0
        self._block_from = self._block_to = 0

    def _open(self) -> IO[bytes]:
        directory = self._directory
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
        return tempfile.TemporaryFile(prefix=".corral-records-", dir=directory, buffering=_BUFFER)

    def add(self, t: int, record: TrialRecord) -> None:
        """Keep ``record`` as task ``t``'s trial (a later record of it replaces it)."""
        r = record.trial
        if self._broken or not 0 <= r < self._n:
            return
        data = dumps_for_report(record.to_dict()).encode()
        try:
            file = self._file
            if file is None:
                file = self._file = self._open()
            file.write(data)
        except OSError:  # a full disk: the report reads the store, the run goes on
            self._broken = True
            self.close()
            return
        i = t * self._n + r
        self._at[i] = self._end
        self._length[i] = len(data)
        self._end += len(data)
        self._flushed = False

    def texts(self, task_id: str, count: int) -> list[str] | None:
        """The texts of ``task_id``'s trials in trial order, if it holds ``count`` of
        them (the task's finished trials, as the report counts them); else None: the
        report reads the task's records from the store."""
        t = None if self._broken or self._file is None else self._index(task_id)
        if t is None:
            return None
        at, length, base = self._at, self._length, t * self._n
        places = [(at[i], length[i]) for i in range(base, base + self._n) if at[i] >= 0]
        if len(places) != count:
            return None
        file = self._file
        assert file is not None  # a record was added
        try:
            if not self._flushed:
                file.flush()
                self._flushed = True
            fd = file.fileno()
            if not self._block_from <= t < self._block_to:
                self._read_block(fd, t)
            block, first = self._block, self._block_at
            end = first + len(block)
            return [
                block[start - first : start - first + size]
                if first <= start and start + size <= end
                else os.pread(fd, size, start).decode()
                for start, size in places
            ]
        except OSError:
            self._broken = True
            self.close()
            return None

    def _read_block(self, fd: int, t: int) -> None:
        """Read the texts of tasks ``t`` onwards (`_BLOCK` of them) in one read, where
        they lie close together: the run finishes trials about in task order, so
        their texts do (one read of a task's texts each cost a report of 40,000 tasks
        a tenth of a second). Where they do not (a run that finished them out of
        order), each text is read on its own, never much more than they take; so are
        those of a task asked for out of order (the next one starts a block)."""
        if t != self._block_to:
            self._block, self._block_at = "", 0
            self._block_from = self._block_to = t + 1
            return
        first, last = t * self._n, min(t + _BLOCK, len(self._task_ids)) * self._n
        at, length = self._at[first:last], self._length[first:last]
        self._block_from, self._block_to = t, t + _BLOCK
        start = min(filter((0).__le__, at), default=-1)
        end = max(map(operator.add, at, length))
        if start < 0 or end - start > min(2 * sum(length) + _SLACK, _MOST):
            self._block, self._block_at = "", 0
            return
        data = os.pread(fd, end - start, start)
        # A record's text is ASCII (`dumps_for_report` escapes the rest), so each is a
        # slice of the block's text, at its place in bytes: decoded once, in C.
        if not data.isascii():
            self._block, self._block_at = "", 0
            return
        self._block, self._block_at = data.decode("ascii"), start

    def _index(self, task_id: str) -> int | None:
        found = self._positions.find(self._task_ids, task_id)
        if found is not None:
            self._positions.expect(found + 1)
        return found

    def close(self) -> None:
        """Let the file go (it has no name: the system frees it). Never raises: what
        could not be flushed is not needed, and a run's own error stays the one seen."""
        try:
            if self._file is not None:
                self._file.close()
        except OSError:
            pass
