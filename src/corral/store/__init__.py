"""Commit stores: the protocol and its backends."""

from ._protocol import BenchmarkInfo, CommitStore, Pending, TrialKey, TrialSummary
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = [
    "BenchmarkInfo",
    "CommitStore",
    "MemoryStore",
    "Pending",
    "SQLiteStore",
    "TrialKey",
    "TrialSummary",
]
