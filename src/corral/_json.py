"""The one check that a recorded value survives a JSON round trip."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ._errors import NotSerializableError

_SCALARS = (str, bool, int, type(None))


def check_json(value: Any, where: str) -> Any:
    """Return ``value`` as plain JSON data, or raise naming the bad part.

    Mappings must have string keys; tuples are recorded as lists; floats must
    be finite. Anything else (sets, bytes, objects, NaN) is refused here, when
    it is recorded, rather than when it is read back.
    """
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        raise NotSerializableError(f"{where} is {value!r}, which JSON cannot record")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise NotSerializableError(
                    f"{where} has key {key!r} of type {type(key).__name__}; "
                    "JSON object keys must be strings"
                )
            out[key] = check_json(item, f"{where}[{key!r}]")
        return out
    if isinstance(value, list | tuple):
        return [check_json(item, f"{where}[{i}]") for i, item in enumerate(value)]
    raise NotSerializableError(
        f"{where} is {value!r} of type {type(value).__name__}, which does not survive "
        "a JSON round trip"
    )


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: Any) -> str:
    """Encode already-checked JSON data compactly (one encoder, made once)."""
    return _ENCODER.encode(value)


loads = json.loads
