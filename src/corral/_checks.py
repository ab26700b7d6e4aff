"""The checks of numbers, flags and paths given as settings, written once, with one
message style: ``NAME must be a positive number of seconds or None, not VALUE`` (a `ConfigError`).

A number is an int or a float that is finite; a bool is not one. A leaf: any layer
may import it.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Literal, NoReturn, TypeGuard, overload

from ._errors import ConfigError


def is_number(value: object) -> TypeGuard[int | float]:
    """Whether ``value`` is a finite int or float (True and False are not numbers)."""
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _refuse(name: str, what: str, value: object, unit: str = "", or_none: bool = False) -> NoReturn:
    of = f" of {unit}" if unit else ""
    alternative = " or None" if or_none else ""
    raise ConfigError(f"{name} must be {what}{of}{alternative}, not {value!r}")


@overload
def positive_number(
    name: str, value: object, *, unit: str = "", or_none: Literal[False] = False
) -> float: ...
@overload
def positive_number(name: str, value: object, *, unit: str = "", or_none: bool) -> float | None: ...
def positive_number(
    name: str, value: object, *, unit: str = "", or_none: bool = False
) -> float | None:
    """``value`` if it is a number > 0 (or None, with ``or_none``), else a `ConfigError`
    naming ``name`` (and the ``unit``, e.g. "seconds")."""
    if value is None and or_none:
        return None
    if not is_number(value) or value <= 0:
        _refuse(name, "a positive number", value, unit, or_none)
    return value


@overload
def seconds(name: str, value: object, *, or_none: Literal[False] = False) -> float: ...
@overload
def seconds(name: str, value: object, *, or_none: bool) -> float | None: ...
def seconds(name: str, value: object, *, or_none: bool = False) -> float | None:
    """A duration: ``value`` if it is a positive number of seconds (or None, with
    ``or_none``), else a `ConfigError` naming ``name``."""
    return positive_number(name, value, unit="seconds", or_none=or_none)


def flag(name: str, value: object) -> bool:
    """``value`` if it is True or False, else a `ConfigError` naming ``name``: read by
    its truth, ``"no"`` or ``"false"`` (a setting read from a file) would mean yes."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, not {value!r}")
    return value


def file_path(name: str, value: object) -> Path:
    """``value`` as a `Path` if it is a non-empty path (text or `os.PathLike`), else a
    `ConfigError` naming ``name``: a number was a TypeError from `Path` or the OS."""
    if not isinstance(value, str | os.PathLike) or not os.fspath(value):
        raise ConfigError(f"{name} must be a path, not {value!r}")
    return Path(value)


def non_negative_number(name: str, value: object) -> float:
    """``value`` if it is a number >= 0, else a `ConfigError` naming ``name``."""
    if not is_number(value) or value < 0:
        _refuse(name, "a non-negative number", value)
    return value


def non_negative_int(name: str, value: object) -> int:
    """``value`` if it is an integer >= 0, else a `ConfigError` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        _refuse(name, "a non-negative integer", value)
    return value


@overload
def positive_int(name: str, value: object, *, or_none: Literal[False] = False) -> int: ...
@overload
def positive_int(name: str, value: object, *, or_none: bool) -> int | None: ...
def positive_int(name: str, value: object, *, or_none: bool = False) -> int | None:
    """``value`` if it is an integer >= 1 (or None, with ``or_none``), else a `ConfigError`
    naming ``name``."""
    if value is None and or_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _refuse(name, "a positive integer", value, "", or_none)
    return value
