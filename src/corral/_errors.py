"""Corral's one error hierarchy."""

from __future__ import annotations

from typing import Literal


class CorralError(Exception):
    """Base class of every error Corral raises on purpose."""


class ConfigError(CorralError, ValueError):
    """Bad input, refused before any trial starts and before anything is written.

    The message names the offending value.
    """


class StoreError(CorralError):
    """The commit store failed (I/O, corruption, a backend error translated)."""


class StoreCorrupt(StoreError, ConfigError):
    """What a store holds is damaged (changed behind Corral's back): text where a
    number belongs, a configuration that is not JSON, an unknown status.

    Raised when the row is read, before anything uses it; the message names the
    benchmark, the trial and commit, and what is wrong. It is bad input (the store
    given), so the CLI exits 2. The store is never changed by reading it.
    """


class CommitConflictError(StoreError):
    """Two writers tried to append the same sequence number to one trial.

    The store's key (benchmark, task, trial, seq) makes a raced append fail
    loudly instead of forking the history.
    """


class NotSerializableError(CorralError, TypeError):
    """A value that a commit would record does not survive a JSON round trip (or is
    larger than the run's ``max_value_bytes``).

    Raised when the value is recorded; the attempt fails, and is not retried
    (recording the same value again would fail the same way).
    """


class RateLimited(CorralError):
    """Raised by an agent, tool or scorer when its provider says "slow down".

    It is not a failed attempt: the trial gives back its slots, waits
    ``retry_after`` seconds (or a backoff when None), and continues from its
    head, while the effective limit of its model shrinks and then grows back.
    A ``retry_after`` that is no number of seconds (a header's text, NaN, a negative
    wait) is a `ConfigError` naming it, raised here: only the trial that made it fails.
    """

    def __init__(
        self,
        message: str = "rate limited",
        *,
        retry_after: float | None = None,
        status_code: int | None = None,
    ):
        if retry_after is not None and not (
            isinstance(retry_after, int | float)
            and not isinstance(retry_after, bool)
            and retry_after >= 0  # False for NaN; infinity is capped by the runner
        ):
            raise ConfigError(
                "RateLimited(retry_after=...) must be a non-negative number of seconds or "
                f"None, not {retry_after!r}"
            )
        super().__init__(message)
        self.retry_after = retry_after
        self.status_code = status_code


class ModelError(CorralError):
    """A model endpoint refused a request in a way no retry fixes (400, 401, 403,
    404, ...): the trial ends at once, its error holding the server's message."""

    def __init__(self, message: str, *, status_code: int | None = None):
        super().__init__(message)
        self.status_code = status_code


class ModelUnavailable(CorralError):
    """A model endpoint failed transiently (a 5xx, a timeout, a dropped connection).

    Unlike Corral's other errors it is retried, as a failed attempt: the retry
    rebuilds the same conversation from the trial's history. ``failure_kind``:
    ``"timeout"`` or ``"dropped"`` when the client knows which (a model call's
    record shows it).
    """

    def __init__(
        self, message: str, *, status_code: int | None = None, failure_kind: str | None = None
    ):
        super().__init__(message)
        self.status_code = status_code
        self.failure_kind = failure_kind


class BenchmarkBusyError(CorralError):
    """Another live runner holds this benchmark id."""


class _Unwrap:
    """Context manager: an exception group whose errors are all one error (a single
    exception, or the same failure heard by several tasks) becomes that error.

    Corral's task groups are an implementation detail; a user catching
    `ConfigError` or `StoreError` from ``run()`` should not need ``except*``.
    """

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> Literal[False]:
        if isinstance(exc, BaseExceptionGroup):
            leaves = distinct_leaves(exc)
            if len(leaves) == 1:
                raise leaves[0]
        return False


def distinct_leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``'s (nested) groups, in order, each distinct error
    once: one of the same type and message as an earlier one is that error again (a
    failed store batch, say, heard by every task that waited on it). The one folding of
    errors, for the API and the CLI alike."""
    out: list[BaseException] = []
    seen: set[tuple[type[BaseException], str]] = set()
    stack = [exc]
    while stack:
        leaf = stack.pop()
        if isinstance(leaf, BaseExceptionGroup):
            stack.extend(reversed(leaf.exceptions))
            continue
        key = (type(leaf), str(leaf))
        if key not in seen:
            seen.add(key)
            out.append(leaf)
    return out


unwrap_single = _Unwrap
