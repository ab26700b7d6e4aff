"""`open_store`: the one place an address (a path or a URI) becomes a store."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ._protocol import CommitStore
from .memory import MemoryStore
from .postgres import PostgresStore, masked_uri
from .sqlite import SQLiteStore

#: What an address may be, for messages.
KNOWN = "a file path, sqlite:///PATH, postgresql://[USER@]HOST/DATABASE or memory:"

# Anything that looks like a URI is one: "mysql://..." must never become a folder.
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_MEMORY = ("memory:", ":memory:")

#: The keyword options each backend takes (beyond read_only and create).
_OPTIONS = {
    "sqlite": {"synchronous"},
    "postgresql": {"synchronous_commit", "retry_for", "readers"},
    "memory": set(),
}


def scheme_of(address: str | os.PathLike[str]) -> str:
    """The backend an address names: ``"sqlite"``, ``"postgresql"`` or ``"memory"``;
    a `ConfigError` listing the known ones for any other scheme."""
    text = os.fspath(address)
    if text.lower() in _MEMORY:
        return "memory"
    match = _URI.match(text)
    if match is None:
        return "sqlite"  # a path
    scheme = match.group(1).lower()  # schemes are case-insensitive (RFC 3986)
    if scheme in ("postgresql", "postgres"):
        return "postgresql"
    if scheme == "sqlite":
        return "sqlite"
    raise ConfigError(f"unknown store address {text!r}: a store is {KNOWN}")


def shown_address(address: str | os.PathLike[str]) -> str:
    """``address`` as messages and titles may show it: a PostgreSQL password masked."""
    text = os.fspath(address)
    return masked_uri(text) if _URI.match(text) and scheme_of(text) == "postgresql" else text


def open_store(
    address: str | os.PathLike[str],
    read_only: bool = False,
    *,
    create: bool = True,
    **options: Any,
) -> CommitStore:
    """The store at ``address``: a file path or ``sqlite:///PATH`` (an SQLite file;
    ``sqlite:////abs/path`` for an absolute one), ``postgresql://user@host/database``
    (or ``postgres://``), or ``memory:``. Any other scheme is a `ConfigError`.

    ``read_only``: the store must exist and is never changed (nothing is created,
    not even PostgreSQL's tables; a database without them holds no benchmarks).
    ``create=False``: the store may be written but must exist already. ``options``
    go to the backend (``synchronous`` for SQLite; ``synchronous_commit``,
    ``retry_for``, ``readers`` for PostgreSQL); one it does not take is refused.
    Nothing is connected or written until the store is opened.
    """
    if not isinstance(address, str | os.PathLike):
        raise ConfigError(f"a store address is a path or a URI, not {address!r}")
    kind = scheme_of(address)
    if unknown := sorted(set(options) - _OPTIONS[kind]):
        raise ConfigError(
            f"{', '.join(unknown)} is not an option of a {kind} store "
            f"(it takes: {', '.join(sorted(_OPTIONS[kind])) or 'none'})"
        )
    # libpq, and the prefixes below, know schemes in lower case only.
    text = _URI.sub(lambda m: m.group(0).lower(), os.fspath(address), count=1)
    if kind == "memory":
        return MemoryStore()
    if kind == "postgresql":
        return PostgresStore(text, read_only=read_only, create=create, **options)
    if text.startswith("sqlite://"):
        # No parameters: a "?mode=ro" must not silently become part of a file name.
        if not text.startswith("sqlite:///") or "?" in text or "#" in text:
            raise ConfigError(
                f"an SQLite address is sqlite:///PATH (three slashes, no parameters), not {text!r}"
            )
        text = text.removeprefix("sqlite:///")
    path = Path(text)
    if (read_only or not create) and not path.is_file():
        why = "not a file" if path.exists() else "no such file"
        raise ConfigError(f"no store at {str(path)!r} ({why})")
    return SQLiteStore(path, read_only=read_only, **options)
