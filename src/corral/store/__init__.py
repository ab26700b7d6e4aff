"""Commit stores: the protocol and its backends."""

from ._copy import Copied, copy_benchmarks
from ._open import open_store, scheme_of
from ._protocol import (
    BenchmarkInfo,
    CommitStore,
    FileStore,
    HostAccess,
    Pending,
    SharedStore,
    TrialKey,
    TrialSummary,
)
from ._runs import RunRecord
from .memory import MemoryStore
from .postgres import PostgresStore
from .sqlite import SQLiteStore

__all__ = [
    "BenchmarkInfo",
    "CommitStore",
    "Copied",
    "FileStore",
    "HostAccess",
    "MemoryStore",
    "Pending",
    "PostgresStore",
    "RunRecord",
    "SQLiteStore",
    "SharedStore",
    "TrialKey",
    "TrialSummary",
    "copy_benchmarks",
    "open_store",
    "scheme_of",
]
