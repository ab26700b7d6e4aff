"""The one check that a recorded value survives a JSON round trip."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ._errors import NotSerializableError

#: The mappings most often recorded or copied, told apart by their type before asking
#: ``isinstance(value, Mapping)``: that is a Python call of the ABC's
#: ``__instancecheck__``, and for a ``mappingproxy`` (the shared empty mapping of a
#: task's inputs, an evaluation's details) three, every time, since CPython never
#: caches the answer for a class registered directly with the ABC.
PLAIN_MAPPINGS = (dict, MappingProxyType)

#: How deeply containers may nest in a recorded value. The stdlib decoder that reads
#: it back on resume recurses once a level, under the interpreter's recursion limit
#: (1,000 by default, less whatever is on the stack): 100 levels, inside a commit
#: payload inside the store's row, stay far from it.
MAX_DEPTH = 100

#: The most decimal digits an integer in a recorded value may have: Python's default
#: limit on converting an int to or from text (`sys.get_int_max_str_digits`), past
#: which the encoder, and any reader with the default, raise.
MAX_INT_DIGITS = 4300
_TOO_LONG = 10**MAX_INT_DIGITS

#: The default of ``run(max_value_bytes=...)``: the most bytes of JSON (UTF-8) one
#: recorded value (an observation, a state, an output, ...) may take.
DEFAULT_MAX_VALUE_BYTES = 4 * 2**20
#: The most bytes of JSON one character of a string can take (an escape: ``\u001f``).
_WIDEST = 6
#: Bytes of JSON a scalar item takes at most, with its comma: the longest float
#: (``-1.2345678901234567e-308``); an integer longer than that adds its digits.
_SCALAR = 25
_SHORT_INT = 10**20


#: What a checked value is: its name, or a template and the value it names.
Where = str | tuple[str, object]


def _written(where: Where) -> str:
    return where if isinstance(where, str) else where[0].format(where[1])


def check_json(value: Any, where: Where, limit: int | None = None) -> Any:
    """Return ``value`` as plain JSON data, or raise naming the bad part (``where``:
    what the value is, or a template and what it names, ``("the state after {!r}",
    tool)``, written out only when something is refused: most values are not).

    Mappings must have string keys; tuples are recorded as lists; floats must
    be finite; integers have at most `MAX_INT_DIGITS` digits (the stores keep a
    payload as JSON text, so any such integer reads back exactly); strings (keys
    too) must be valid Unicode, without lone surrogates, since the store writes
    UTF-8; containers nest at most `MAX_DEPTH` levels and never contain
    themselves. Anything else (sets, bytes, objects, NaN) is refused here, when
    it is recorded, rather than when it is read back. With a ``limit``, so is a
    value whose JSON text takes more than ``limit`` bytes.
    """
    # A cheap upper bound on the bytes of the value's JSON: each string's characters at
    # their widest, each container's items as scalars at their longest.
    # The values most often recorded (a tool's name, a state, a score) need no walk: an
    # ASCII string, a short integer or a finite float is itself, as `_check` finds.
    plain: Any
    if type(value) is str and value.isascii():
        plain, bound = value, _SCALAR + _WIDEST * len(value) + 2
    elif (type(value) is int and -_SHORT_INT < value < _SHORT_INT) or (
        type(value) is float and math.isfinite(value)
    ):
        plain, bound = value, _SCALAR
    elif type(value) in PLAIN_MAPPINGS and not value:  # an evaluation's details, mostly
        plain, bound = {}, _SCALAR
    else:
        tally = [_SCALAR]
        try:
            plain = _check(value, MAX_DEPTH, tally)
        except _Refused as refused:
            raise NotSerializableError(refused.explain(_written(where))) from None
        bound = tally[0]
    # Encoded only when it may be too large: few values come near the limit.
    if limit is not None and bound > limit:
        size = len(dumps(plain).encode("utf-8"))
        if size > limit:
            raise NotSerializableError(
                f"{_written(where)} is {size:,} bytes of JSON, more than max_value_bytes={limit:,}"
            )
    return plain


class _Refused(Exception):
    """A bad part found deep in a value; each level adds its key on the way out, so the
    path is only spelled out when something is wrong."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        self.steps: list[tuple[str, int]] = []  # (key, id of the container), innermost first

    def explain(self, where: str) -> str:
        path = where
        seen: dict[int, str] = {}  # container id -> the path it was reached by
        for key, container in reversed(self.steps):
            if container in seen:  # the walk came round to a container on its own path
                return f"{seen[container]} contains itself at {path}"
            seen[container] = path
            path += key
        return f"{path} {self.problem}"


def _check(value: Any, room: int, tally: list[int]) -> Any:
    if isinstance(value, str):
        tally[0] += _WIDEST * len(value) + 2
        if not value.isascii():
            _check_unicode(value, "is")
        return value
    if value is None:
        return value
    if isinstance(value, int):  # a bool too: within any bound
        if -_SHORT_INT < value < _SHORT_INT:
            return value
        if -_TOO_LONG < value < _TOO_LONG:
            tally[0] += value.bit_length() // 3 + 2  # digits, and a sign
            return value
        digits = int(value.bit_length() * math.log10(2)) + 1  # str() itself would raise
        raise _Refused(
            f"is an integer of about {digits} digits, more than the {MAX_INT_DIGITS} "
            "a JSON reader takes"
        )
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise _Refused(f"is {value!r}, which JSON cannot record")
    # By type first: checking the `Mapping` ABC costs more than the rest of a small value.
    if type(value) in PLAIN_MAPPINGS or isinstance(value, Mapping):
        if room == 0:
            raise _Refused(f"is nested more than {MAX_DEPTH} levels deep")
        tally[0] += 2 + _SCALAR * len(value)
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _Refused(
                    f"has key {key!r} of type {type(key).__name__}; "
                    "JSON object keys must be strings"
                )
            if not key.isascii():
                _check_unicode(key, "has key")
            tally[0] += _WIDEST * len(key) + 3  # quotes, colon
            try:
                out[key] = _check(item, room - 1, tally)
            except _Refused as refused:
                refused.steps.append((f"[{key!r}]", id(value)))
                raise
        return out
    if isinstance(value, list | tuple):
        if room == 0:
            raise _Refused(f"is nested more than {MAX_DEPTH} levels deep")
        tally[0] += 2 + _SCALAR * len(value)
        items = []
        for i, item in enumerate(value):
            try:
                items.append(_check(item, room - 1, tally))
            except _Refused as refused:
                refused.steps.append((f"[{i}]", id(value)))
                raise
        return items
    raise _Refused(
        f"is {short_repr(value)} of type {type(value).__name__}, which does not survive "
        "a JSON round trip"
    )


def _check_unicode(text: str, verb: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise _Refused(
            f"{verb} {short_repr(text)}, which holds a lone surrogate "
            f"({text[exc.start]!r} at index {exc.start}): not valid Unicode, so it "
            "cannot be stored"
        ) from None


def recordable_text(text: str) -> str:
    """``text`` with any lone surrogate written as its escape (``\\ud800``): for text
    Corral records itself (an error's message, a traceback), which must not fail."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def short_repr(value: object, limit: int = 80) -> str:
    """``repr(value)``, cut to ``limit`` characters: a message names a value, not all of it."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _refuse(value: Any) -> Any:
    raise TypeError(f"{value!r} is not JSON data")


# The stdlib's C encoder, made once: `json.dumps` builds a new one per call, which
# costs more than encoding the small payloads a commit carries.
_c_encoder = getattr(json.encoder, "c_make_encoder", None)
if _c_encoder is not None:
    _encode = _c_encoder(
        None, _refuse, json.encoder.encode_basestring, None, ":", ",", False, False, False
    )

    def dumps(value: Any) -> str:
        """Encode already-checked JSON data compactly."""
        return "".join(_encode(value, 0))

else:  # pragma: no cover - Pythons without the C accelerator
    _ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)

    def dumps(value: Any) -> str:
        """Encode already-checked JSON data compactly."""
        return _ENCODER.encode(value)


loads = json.loads


def finite(value: Any) -> Any:
    """``value`` with its NaN and infinities as strings (``"inf"``): JSON has no such
    numbers, and a parser of strict JSON (``JSON.parse``, jq) refuses Python's
    ``Infinity``. A difference of two finite scores may pass the largest float."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [finite(v) for v in value]
    return value


if _c_encoder is not None:
    # `json.JSONEncoder.encode` makes a C encoder per call (3 of the 9 us a trial
    # record takes); this one is made once. No check for a value that contains itself:
    # a report's values are records of checked JSON.
    _report_encode = _c_encoder(
        None, str, json.encoder.encode_basestring_ascii, None, ": ", ", ", False, False, True
    )

    def dumps_for_report(value: Any) -> str:
        """``json.dumps(value, default=str)``, as a report writes its JSON (a value JSON
        has no type for as its text)."""
        return "".join(_report_encode(value, 0))

else:  # pragma: no cover - Pythons without the C accelerator
    _REPORT_ENCODER = json.JSONEncoder(default=str)

    def dumps_for_report(value: Any) -> str:
        """``json.dumps(value, default=str)``, as a report writes its JSON."""
        return _REPORT_ENCODER.encode(value)
