"""When and how long to wait before retrying a failed attempt."""

from __future__ import annotations

import os
import random
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field

import anyio

from .._checks import non_negative_int, non_negative_number
from .._errors import (
    ConfigError,
    CorralError,
    ModelUnavailable,
    NotSerializableError,
    RateLimited,
)
from .._json import recordable_text


def exception_types(given: object) -> tuple[type[BaseException], ...]:
    """``given`` (any collection of exception types) as a tuple; anything else is a
    `ConfigError` naming it (one type alone too: it is no collection)."""
    if isinstance(given, type | str | bytes) or not isinstance(given, Iterable):
        raise ConfigError(f"no_retry must be a list of exception types, not {given!r}")
    kinds = tuple(given)
    for kind in kinds:
        if not (isinstance(kind, type) and issubclass(kind, BaseException)):
            raise ConfigError(f"no_retry must hold exception types, not {kind!r}")
    return kinds


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter: attempt n waits U(0, min(cap, base * 2**n)).

    ``no_retry`` names exception types that end a trial at once, besides Corral's
    own errors (bad configuration, store failures), which no retry can fix. Any
    other exception is retried, as SPEC (sections 1 and 3.2) promises: a value
    that cannot be recorded (`NotSerializableError`) and a ``TypeError`` too, since
    an agent may answer differently on its next attempt (``no_retry=(TypeError,)``
    ends such a trial at once); so is `ModelUnavailable`, a transient failure of a
    model endpoint.

    A rate limit is not a failed attempt: the trial waits as the provider asks
    (else a backoff), but never longer than ``max_rate_limit_wait`` seconds at a
    time, and after ``max_deferrals`` such waits it ends ``error`` naming the rate
    limit (a ``Retry-After: 0`` forever, or a year, must not hang the run).
    """

    max_retries: int = 2
    backoff_base: float = 0.5
    backoff_cap: float = 30.0
    no_retry: tuple[type[BaseException], ...] = ()
    max_rate_limit_wait: float = 600.0
    max_deferrals: int = 100
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def __post_init__(self) -> None:
        non_negative_int("max_retries", self.max_retries)
        for name in ("backoff_base", "backoff_cap", "max_rate_limit_wait"):
            non_negative_number(name, getattr(self, name))
        non_negative_int("max_deferrals", self.max_deferrals)
        # A tuple: ``isinstance`` takes no list, and a list crashed the run at its first
        # exception.
        object.__setattr__(self, "no_retry", exception_types(self.no_retry))

    def retryable(self, exc: BaseException, attempt: int) -> bool:
        """Whether attempt ``attempt`` (0-based), which raised ``exc``, gets another try."""
        if attempt >= self.max_retries or not isinstance(exc, Exception):
            return False
        if isinstance(exc, CorralError) and not isinstance(exc, _RETRIED_OWN):
            return False
        return not isinstance(exc, self.no_retry)

    def delay(self, attempt: int) -> float:
        # 2**1024 is no float: past 2**64 the cap decides anyway.
        ceiling = min(self.backoff_cap, self.backoff_base * (2 ** min(attempt, 64)))
        return self.rng.uniform(0, ceiling)

    def rate_limit_wait(self, retry_after: float | None, deferrals: int) -> float:
        """Seconds to wait out a rate limit: the provider's ``retry_after`` (else the
        backoff of the ``deferrals``-th wait), at most ``max_rate_limit_wait``."""
        wait = self.delay(deferrals) if retry_after is None else retry_after
        return min(wait, self.max_rate_limit_wait)

    def rate_limit_exhausted(self, limited: BaseException, deferrals: int) -> RateLimited | None:
        """The error that ends a trial still rate limited after ``deferrals`` waits,
        or None while it may wait again."""
        if deferrals < self.max_deferrals:
            return None
        asked = getattr(limited, "retry_after", None)
        note = f"still rate limited after {deferrals} waits (max_deferrals={self.max_deferrals})"
        if asked is not None and asked > self.max_rate_limit_wait:
            note += (
                f"; the provider asked to wait {asked:g} s, waited "
                f"{self.max_rate_limit_wait:g} s (max_rate_limit_wait)"
            )
        return RateLimited(f"{limited} ({note})", retry_after=asked)


#: Corral's own errors that an attempt may not meet again: a model endpoint's
#: transient failure, and a value the attempt returned that could not be recorded.
_RETRIED_OWN = (ModelUnavailable, NotSerializableError)


#: Characters of an error's type and message a record keeps; the rest is cut, with a
#: marker saying how much (a message can hold a whole reply).
MAX_ERROR_TEXT = 10_000


def describe(exc: BaseException) -> str:
    """The error text a trial record keeps: the exception's type and message, cut to
    `MAX_ERROR_TEXT` characters and a marker."""
    message = str(exc)
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    if len(text) <= MAX_ERROR_TEXT:
        return text
    return f"{text[:MAX_ERROR_TEXT]}... [{len(text) - MAX_ERROR_TEXT:,} more characters]"


#: Frames of a traceback kept: the user's innermost first, then Corral's, in budget.
_MAX_FRAMES = 12
_MAX_TRACEBACK = 4000
_CORRAL_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def trimmed_traceback(exc: BaseException) -> str:
    """``exc``'s traceback, trimmed: the user's frames (not Corral's, anyio's or the
    stdlib's asyncio) first, at most a dozen, and at most a few thousand characters.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if not _internal(f.filename)]
    kept = (mine or list(frames))[-_MAX_FRAMES:]
    text = "".join(traceback.format_list(kept)) + "".join(
        traceback.format_exception_only(type(exc), exc)
    )
    if len(text) > _MAX_TRACEBACK:
        text = "...\n" + text[-_MAX_TRACEBACK:]
    return text


def _internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    return (
        path.startswith(_CORRAL_DIR + os.sep)
        or f"{os.sep}anyio{os.sep}" in path
        or f"{os.sep}asyncio{os.sep}" in path
        or f"{os.sep}trio{os.sep}" in path
    )


def error_fields(exc: BaseException) -> dict[str, str]:
    """What a commit records of an error: ``error`` (type and message), ``error_type``
    and a trimmed ``traceback``."""
    # A message holding a lone surrogate must not make the error itself unrecordable.
    return {
        "error": recordable_text(describe(exc)),
        "error_type": type(exc).__name__,
        "traceback": recordable_text(trimmed_traceback(exc)),
    }


def met_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` was raised as a cancellation went through: one is among the
    exceptions it replaced (a cleanup failing as it was cancelled), or among those of a
    group (a task of the agent's own). An error raised where no cancellation reached
    (after a call the deadline could not cut) is the code's own."""
    cancelled = anyio.get_cancelled_exc_class()
    seen: set[int] = set()
    todo = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, cancelled):
            return True
        todo += [e for e in (current.__context__, current.__cause__) if e is not None]
        if isinstance(current, BaseExceptionGroup):
            todo += current.exceptions
    return False
