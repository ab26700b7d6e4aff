"""Recognising "slow down" from a provider: Corral's own signal and HTTP 429s."""

from __future__ import annotations

from .._errors import CorralError, RateLimited

_SDK_MODULES = ("openai", "anthropic", "httpx", "google", "mistralai", "litellm")


def as_rate_limit(exc: BaseException) -> RateLimited | None:
    """``exc`` as a `RateLimited`, if it says the provider is rate limiting; else None.

    Recognised without importing any SDK: `RateLimited` itself, the
    ``RateLimitError`` classes of the OpenAI and Anthropic SDKs, and any error
    whose status code (or whose response's status code) is 429, such as
    ``httpx.HTTPStatusError``. A ``Retry-After`` header in seconds is honoured.
    Corral's other errors say what they mean: a `ModelError` with status 429 is an
    exhausted quota, which no wait fixes.
    """
    if isinstance(exc, RateLimited):
        return exc
    if isinstance(exc, CorralError):
        return None
    response = getattr(exc, "response", None)
    status = getattr(exc, "status_code", None) or getattr(response, "status_code", None)
    named = type(exc).__name__ == "RateLimitError" and type(exc).__module__.startswith(_SDK_MODULES)
    if status != 429 and not named:
        return None
    return RateLimited(str(exc) or "HTTP 429", retry_after=_retry_after(response))


def _retry_after(response: object) -> float | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        value = headers.get("retry-after")
        seconds = float(value) if value is not None else None
    except (TypeError, ValueError, AttributeError):
        return None
    return seconds if seconds is not None and seconds >= 0 else None
