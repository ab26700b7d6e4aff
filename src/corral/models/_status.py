"""An HTTP answer of a model endpoint as Corral's errors: rate limit, transient, refusal."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from .._errors import ModelError, ModelUnavailable, RateLimited

#: Statuses that a later attempt may not meet (besides 5xx): OpenAI's SDK retries these too.
_TRANSIENT = frozenset({408, 409})
_MAX_MESSAGE = 500
#: Unavailable, or overloaded (Anthropic's 529): with a Retry-After, a rate limit.
_BUSY = frozenset({503, 529})


def status_error(
    status: int, headers: Mapping[str, str], body: bytes, url: str
) -> RateLimited | ModelError | ModelUnavailable:
    """The error a non-2xx answer means, with the server's message in it."""
    message = f"HTTP {status} from {url}: {server_message(body)}"
    now = time.time()
    if status == 429:
        if _code(body) == "insufficient_quota":  # out of credit: waiting will not help
            return ModelError(message, status_code=status)
        return RateLimited(message, retry_after=retry_after(headers, now), status_code=status)
    # The account's rate limit headers come with every answer (Anthropic rounds its
    # token count to thousands, so a busy account reads 0): they say when its quota
    # refills, not when an overload ends. Only the server's own Retry-After does.
    wait = _told(headers, now)
    if status in _BUSY and wait is not None:
        return RateLimited(message, retry_after=wait, status_code=status)
    if status >= 500 or status in _TRANSIENT:
        return ModelUnavailable(message, status_code=status)
    return ModelError(message, status_code=status)


def server_message(body: bytes) -> str:
    """The error message in an error body (OpenAI's ``{"error": {"message": ...}}`` or
    similar), else the body's text, shortened."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the decoder's limit
        data = None
    if isinstance(data, Mapping):
        error = data.get("error", data)
        if isinstance(error, Mapping):
            error = error.get("message") or error.get("detail") or error
        if isinstance(data.get("detail"), str):
            error = data["detail"]
        text = error if isinstance(error, str) else json.dumps(error)
    text = " ".join(text.split()) or "(empty body)"
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "..."


def _code(body: bytes) -> str | None:
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    error = data.get("error") if isinstance(data, Mapping) else None
    code = error.get("code") if isinstance(error, Mapping) else None
    return code if isinstance(code, str) else None


def retry_after(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds the server asks to wait, or None if it does not say.

    Read from ``retry-after-ms``, then ``retry-after`` (seconds or an HTTP date),
    then the ``x-ratelimit-reset-*`` headers (``1s``, ``6m0s``, ``20ms``; the
    longest of those whose ``x-ratelimit-remaining-*`` is exhausted or unknown)
    and Anthropic's ``anthropic-ratelimit-*-reset`` (an RFC 3339 time, likewise).
    """
    told = _told(headers, now)
    if told is not None:
        return told
    lower = {k.lower(): v for k, v in headers.items()}
    resets = []
    for name, text in lower.items():
        if name.startswith("x-ratelimit-reset-"):
            remaining = _number(lower.get("x-ratelimit-remaining-" + name[18:]))
            seconds = duration(text)
        elif name.startswith(_ANTHROPIC) and name.endswith("-reset"):
            remaining = _number(lower.get(name[: -len("reset")] + "remaining"))
            when = _iso_time(text)
            seconds = None if when is None else max(0.0, when - now)
        else:
            continue
        if seconds is not None and (remaining is None or remaining < 1):
            resets.append(seconds)
    return max(resets) if resets else None


_ANTHROPIC = "anthropic-ratelimit-"


def _told(headers: Mapping[str, str], now: float) -> float | None:
    """The wait of ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), or
    None if neither says one."""
    lower = {k.lower(): v for k, v in headers.items()}
    millis = _number(lower.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = lower.get("retry-after")
    if value is not None:
        seconds = _number(value)
        if seconds is not None:
            return seconds
        when = _http_date(value)
        if when is not None:
            return max(0.0, when - now)
    return None


def _iso_time(text: str) -> float | None:
    """``2026-12-02T01:00:30Z`` (RFC 3339) as a timestamp; None if unreadable."""
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    try:
        return when.timestamp()
    except (OverflowError, OSError, ValueError):
        return None


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _http_date(text: str) -> float | None:
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # "-0000": HTTP dates are in UTC
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def duration(text: str) -> float | None:
    """``"6m0s"``, ``"1.5s"``, ``"20ms"`` or plain seconds as seconds; None if unreadable."""
    text = text.strip()
    plain = _number(text)
    if plain is not None:
        return plain
    total, at = 0.0, 0
    for match in _PART.finditer(text):
        if match.start() != at:
            return None
        total += float(match.group(1)) * _UNIT[match.group(2)]
        at = match.end()
    # "999...9s" past a float's range is inf, which no record can hold: unreadable.
    return total if at == len(text) and at > 0 and math.isfinite(total) else None
