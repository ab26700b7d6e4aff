"""A small JSON Schema check for tool arguments (no dependency).

It covers what tool schemas use: ``type``, ``enum``, ``const``, ``properties``,
``patternProperties``, ``required``, ``additionalProperties``, ``items``,
``minimum``/``maximum``, ``minLength``/``maxLength``, ``minItems``/``maxItems``
and ``anyOf``/``oneOf`` (exactly one). Other keywords are accepted and not checked (a
``oneOf`` is not refused for several matches where one has such a keyword).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict, Mapping),
    "array": (list, tuple),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int,),
}


def _is(value: object, name: str) -> bool:
    if name in ("number", "integer") and isinstance(value, bool):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    kinds = _TYPES.get(name)
    return kinds is None or isinstance(value, kinds)


def schema_errors(schema: Mapping[str, Any] | bool, value: object, path: str = "") -> list[str]:
    """What is wrong with ``value`` under ``schema`` (empty when it is valid); the
    schema ``true`` allows anything, ``false`` nothing."""
    where = path or "arguments"
    if not isinstance(schema, Mapping):
        return [] if schema is not False else [f"{where} is not allowed here"]
    kind = schema.get("type")
    if kind is not None:
        names = [kind] if isinstance(kind, str) else list(kind)
        if not any(_is(value, name) for name in names):
            return [f"{where} must be of type {' or '.join(names)}, not {_type_name(value)}"]
    if "enum" in schema and not any(_equal(value, v) for v in schema["enum"]):
        return [f"{where} must be one of {schema['enum']!r}, not {value!r}"]
    if "const" in schema and not _equal(value, schema["const"]):
        return [f"{where} must be {schema['const']!r}, not {value!r}"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            matched = [s for s in schema[key] if not schema_errors(s, value, path)]
            if not matched:
                return [f"{where} matches none of the allowed schemas"]
            # Exactly one, as JSON Schema says; a schema with keywords not checked here
            # (a $ref, a pattern) may not truly match: the call is not refused for it.
            if key == "oneOf" and sum(1 for s in matched if _checked_fully(s)) > 1:
                return [f"{where} matches more than one of the schemas of oneOf"]
    errors: list[str] = []
    if isinstance(value, Mapping):
        errors += _object_errors(schema, value, path)
    elif isinstance(value, list | tuple):
        items = schema.get("items")
        if isinstance(items, Mapping | bool):
            for i, item in enumerate(value):
                errors += schema_errors(items, item, f"{path}[{i}]" if path else f"[{i}]")
        errors += _bounds(schema, len(value), where, "minItems", "maxItems", "items")
    elif isinstance(value, str):
        errors += _bounds(schema, len(value), where, "minLength", "maxLength", "characters")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{where} must be >= {schema['minimum']}, not {value!r}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{where} must be <= {schema['maximum']}, not {value!r}")
    return errors


#: The keywords `schema_errors` checks, and those that ask nothing of a value.
_CHECKED = frozenset(
    (
        *("type", "enum", "const", "properties", "patternProperties", "required"),
        *("additionalProperties", "items", "minimum", "maximum", "minLength", "maxLength"),
        *("minItems", "maxItems", "anyOf", "oneOf"),
        *("title", "description", "default", "examples", "$comment", "deprecated"),
        *("readOnly", "writeOnly"),
    )
)


def _checked_fully(schema: object) -> bool:
    """Whether `schema_errors` checks every keyword of ``schema``, at every level (a
    value it finds no error in surely matches it)."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, Mapping) or not _CHECKED.issuperset(schema):
        return False
    subs = [schema[key] for key in ("additionalProperties", "items") if key in schema]
    for key in ("properties", "patternProperties"):
        subs += (schema.get(key) or {}).values()
    for key in ("anyOf", "oneOf"):
        subs += schema.get(key) or ()
    return all(_checked_fully(sub) for sub in subs)


def _equal(a: object, b: object) -> bool:
    """JSON's equality: as Python's, but a boolean is never a number (``true != 1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping | list | tuple) or isinstance(b, Mapping | list | tuple):
        return False
    return a == b


def _object_errors(schema: Mapping[str, Any], value: Mapping[Any, Any], path: str) -> list[str]:
    errors = []
    properties = schema.get("properties") or {}
    for name in schema.get("required") or ():
        if name not in value:
            errors.append(f"missing required {_join(path, name)!r}")
    patterns = schema.get("patternProperties") or {}
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        # Declared by name or by a matching pattern (its schema may be just `true`):
        # not an additional property, whatever ``additionalProperties`` says.
        subs = [properties[name]] if name in properties else []
        subs += [sub for pattern, sub in patterns.items() if _matches(pattern, name)]
        for sub in subs or [extra]:
            if isinstance(sub, Mapping):
                errors += schema_errors(sub, item, _join(path, name))
            elif sub is False:
                errors.append(f"unexpected property {_join(path, name)!r}")
    return errors


def _matches(pattern: object, name: object) -> bool:
    """Whether ``name`` matches a ``patternProperties`` regex (one Python cannot read
    matches nothing: it is not checked)."""
    try:
        return isinstance(pattern, str) and re.search(pattern, str(name)) is not None
    except re.error:
        return False


def _bounds(
    schema: Mapping[str, Any], size: int, where: str, low: str, high: str, unit: str
) -> list[str]:
    if low in schema and size < schema[low]:
        return [f"{where} must have at least {schema[low]} {unit}"]
    if high in schema and size > schema[high]:
        return [f"{where} must have at most {schema[high]} {unit}"]
    return []


def _join(path: str, name: object) -> str:
    return f"{path}.{name}" if path else str(name)


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__
