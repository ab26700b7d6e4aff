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
