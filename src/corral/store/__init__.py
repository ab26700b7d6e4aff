"""Commit stores: the protocol and its backends."""

from ._copy import Copied, copy_benchmarks
from ._protocol import BenchmarkInfo, CommitStore, Pending, TrialKey, TrialSummary
from .memory import MemoryStore
from .postgres import PostgresStore
from .sqlite import SQLiteStore

__all__ = [
    "BenchmarkInfo",
    "CommitStore",
    "Copied",
    "MemoryStore",
    "Pending",
    "PostgresStore",
    "SQLiteStore",
    "TrialKey",
    "TrialSummary",
    "copy_benchmarks",
]
