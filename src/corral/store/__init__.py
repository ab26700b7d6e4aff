"""Commit stores: the protocol and its backends."""

from ._protocol import BenchmarkInfo, CommitStore, TrialKey, TrialSummary
from .memory import MemoryStore
from .sqlite import SQLiteStore

__all__ = ["BenchmarkInfo", "CommitStore", "MemoryStore", "SQLiteStore", "TrialKey", "TrialSummary"]
