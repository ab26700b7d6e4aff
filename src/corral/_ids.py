"""The one check of an id (benchmark, task, dependency, model): what the store, the
report files and a one-line display can all hold."""

from __future__ import annotations

import unicodedata

from ._errors import ConfigError
from ._json import short_repr

MAX_ID_LENGTH = 200

# Characters that break a line or reorder the text around them: an id holding one
# shows as something else in a table or a log. Format characters in general (Cf)
# stay allowed, since joiners (U+200C, U+200D) belong in real names and emoji.
_BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_BREAKING = frozenset({"Cc", "Zl", "Zp"})


def check_id(what: str, value: object) -> str:
    """Return ``value`` if it is a usable id, else raise `ConfigError` naming ``what``.

    An id is a string, not blank, of at most 200 characters, with no control,
    line-breaking or bidirectional-override character and no lone surrogate.
    """
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{what} must be a non-empty string, not {short_repr(value)}")
    if len(value) > MAX_ID_LENGTH:
        raise ConfigError(
            f"{what} {short_repr(value)} is {len(value)} characters long; "
            f"the limit is {MAX_ID_LENGTH}"
        )
    if value.isprintable():  # no Cc, Cf, Cs, Zl or Zp at all: the common case
        return value
    for index, char in enumerate(value):
        kind = unicodedata.category(char)
        if kind == "Cs":
            raise ConfigError(
                f"{what} {short_repr(value)} holds a lone surrogate ({char!r} at index {index}), "
                "which is not valid Unicode"
            )
        if kind in _BREAKING or char in _BIDI:
            raise ConfigError(
                f"{what} {short_repr(value)} holds the control character {char!r} at index {index}"
            )
    return value
