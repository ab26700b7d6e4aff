"""`open_store`: the one place an address (a path or a URI) becomes a store."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._checks import flag
from .._errors import ConfigError
from ._protocol import CommitStore
from .memory import MemoryStore
from .postgres import PostgresStore, masked_uri
from .sqlite import SQLiteStore

# Anything that looks like a URI is one: "mysql://..." must never become a folder.
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: libpq's connection keywords (any of which may come first in its key=value form).
_LIBPQ_KEYWORDS = (
    "host hostaddr port dbname user password passfile require_auth channel_binding "
    "connect_timeout client_encoding options application_name fallback_application_name "
    "keepalives keepalives_idle keepalives_interval keepalives_count tcp_user_timeout "
    "replication gssencmode sslmode sslnegotiation requiressl sslcompression sslcert "
    "sslkey sslkeylogfile sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni "
    "requirepeer ssl_min_protocol_version ssl_max_protocol_version min_protocol_version "
    "max_protocol_version krbsrvname gsslib gssdelegation service target_session_attrs "
    "load_balance_hosts scram_client_key scram_server_key oauth_issuer oauth_client_id "
    "oauth_client_secret oauth_scope"
).split()
#: libpq's key=value connection string (``host=db dbname=evals``), which the store takes
#: only as a URI: a path that starts so is written ``./host=...`` or ``sqlite:///host=...``.
_CONNINFO = re.compile(rf"^\s*(?:{'|'.join(_LIBPQ_KEYWORDS)})\s*=")


@dataclass(frozen=True, slots=True)
class Backend:
    """One entry of the registry: a backend, the URI schemes that name it, the keyword
    options it takes (beyond ``read_only`` and ``create``) and how an address opens it."""

    name: str
    schemes: tuple[str, ...]
    options: frozenset[str]
    #: How messages show its addresses.
    shown: str
    #: ``open(address, read_only, create, options)``, the address with its scheme in
    #: lower case.
    open: Callable[[str, bool, bool, dict[str, Any]], CommitStore]


def _open_memory(text: str, read_only: bool, create: bool, options: dict[str, Any]) -> CommitStore:
    return MemoryStore()


def _open_postgres(
    text: str, read_only: bool, create: bool, options: dict[str, Any]
) -> CommitStore:
    return PostgresStore(text, read_only=read_only, create=create, **options)


def _open_sqlite(text: str, read_only: bool, create: bool, options: dict[str, Any]) -> CommitStore:
    given = text
    if text.startswith("sqlite://"):
        # No parameters: a "?mode=ro" must not silently become part of a file name.
        if not text.startswith("sqlite:///") or "?" in text or "#" in text:
            raise ConfigError(
                f"an SQLite address is sqlite:///PATH (three slashes, no parameters), not {text!r}"
            )
        text = text.removeprefix("sqlite:///")
    if not text:  # Path("") is ".": a message would name a folder nobody gave
        raise ConfigError(f"store address {given!r} names no file: a store is {KNOWN}")
    path = Path(text)
    if (read_only or not create) and not path.is_file():
        why = "not a file" if path.exists() else "no such file"
        raise ConfigError(f"no store at {str(path)!r} ({why})")
    return SQLiteStore(path, read_only=read_only, create=create, **options)


#: The registry: a new backend is its module in ``store/`` plus one entry here (and one
#: parameter of the store contract suite). A path with no scheme is SQLite; ``memory:``
#: (or ``:memory:``) is the memory store.
BACKENDS: tuple[Backend, ...] = (
    Backend(
        "sqlite",
        ("sqlite",),
        frozenset({"synchronous"}),
        "a file path, sqlite:///PATH",
        _open_sqlite,
    ),
    Backend(
        "postgresql",
        ("postgresql", "postgres"),
        frozenset({"synchronous_commit", "retry_for", "readers"}),
        "postgresql://[USER@]HOST/DATABASE",
        _open_postgres,
    ),
    Backend("memory", (), frozenset(), "memory:", _open_memory),
)
_BY_NAME = {b.name: b for b in BACKENDS}
_BY_SCHEME = {scheme: b for b in BACKENDS for scheme in b.schemes}
_MEMORY = ("memory:", ":memory:")

#: What an address may be, for messages.
KNOWN = " or ".join((", ".join(b.shown for b in BACKENDS[:-1]), BACKENDS[-1].shown))


def scheme_of(address: str | os.PathLike[str]) -> str:
    """The backend an address names (``"sqlite"``, ``"postgresql"``, ``"memory"``, ...);
    a `ConfigError` listing the known ones for any other scheme."""
    return _backend(address).name


def _backend(address: str | os.PathLike[str]) -> Backend:
    text = os.fspath(address)
    if text.lower() in _MEMORY:
        return _BY_NAME["memory"]
    match = _URI.match(text)
    if match is None:
        if isinstance(address, str) and _CONNINFO.match(text):
            # Never a file named by it (a password in its name), nor shown in a message.
            raise ConfigError(
                "a PostgreSQL store's address is a URI, postgresql://USER[:PASSWORD]@HOST"
                "/DATABASE, not libpq's key=value form (host=... dbname=...); a file "
                "whose name starts so is written ./NAME or sqlite:///NAME"
            )
        return _BY_NAME["sqlite"]  # a path
    found = _BY_SCHEME.get(match.group(1).lower())  # schemes are case-insensitive (RFC 3986)
    if found is None:
        raise ConfigError(f"unknown store address {text!r}: a store is {KNOWN}")
    return found


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
    flag("read_only", read_only), flag("create", create)  # the memory store takes neither
    backend = _backend(address)
    if unknown := sorted(set(options) - backend.options):
        raise ConfigError(
            f"{', '.join(unknown)} is not an option of a {backend.name} store "
            f"(it takes: {', '.join(sorted(backend.options)) or 'none'})"
        )
    # libpq, and the prefixes above, know schemes in lower case only.
    text = _URI.sub(lambda m: m.group(0).lower(), os.fspath(address), count=1)
    return backend.open(text, read_only, create, options)
