"""Corral's one error hierarchy."""

from __future__ import annotations


class CorralError(Exception):
    """Base class of every error Corral raises on purpose."""


class ConfigError(CorralError, ValueError):
    """Bad input, refused before any trial starts and before anything is written.

    The message names the offending value.
    """


class StoreError(CorralError):
    """The commit store failed (I/O, corruption, a backend error translated)."""


class CommitConflictError(StoreError):
    """Two writers tried to append the same sequence number to one trial.

    The store's key (benchmark, task, trial, seq) makes a raced append fail
    loudly instead of forking the history.
    """


class NotSerializableError(CorralError, TypeError):
    """A value that a commit would record does not survive a JSON round trip.

    Raised when the value is recorded; the attempt fails and is retried like
    any other exception.
    """


class BenchmarkBusyError(CorralError):
    """Another live runner holds this benchmark id."""
