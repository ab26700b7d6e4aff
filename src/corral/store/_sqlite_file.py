"""The store's file: what is at a path before we touch it, its identity, and its errors.

A file is only ever changed once a read-only look has found it empty or a
Corral store: a foreign SQLite database (another program's) is never given
our tables or switched to WAL.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import NamedTuple

from .._errors import ConfigError, CorralError, StoreCorrupt, StoreError

SCHEMA_VERSION = 3
#: The tables of each schema version this code reads. Version 2 only added ``runs``
#: (the run records), version 3 ``trial_heads`` (each trial's head, see
#: `corral.store._heads`): a writer adds what an older store lacks when it opens one.
TABLES = {
    1: frozenset({"meta", "benchmarks", "commits"}),
    2: frozenset({"meta", "benchmarks", "commits", "runs"}),
    3: frozenset({"meta", "benchmarks", "commits", "runs", "trial_heads"}),
}


def uri(path: Path, *, read_only: bool, immutable: bool = False) -> str:
    """A ``file:`` URI for ``path`` (percent-encoded, so '?' or '#' in a name is safe)."""
    query = ("?mode=ro" if read_only else "") + ("&immutable=1" if immutable else "")
    return path.absolute().as_uri() + query


#: A WAL reader that cannot make the ``-shm`` beside the file (a folder it may not write,
#: a read-only mount).
_NO_SHM = frozenset({"SQLITE_READONLY_DIRECTORY", "SQLITE_CANTOPEN"})


def connect(path: Path, *, read_only: bool) -> sqlite3.Connection:
    conn = _connect(uri(path, read_only=read_only))
    if read_only and not path.with_name(path.name + "-wal").exists():
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.OperationalError as exc:
            if getattr(exc, "sqlite_errorname", "") not in _NO_SHM or not path.is_file():
                raise
            # A folder this process may not write: a writer at work keeps a -wal beside
            # the file, and with none there the file is read as it is (SQLite's
            # immutable), needing no -shm.
            conn.close()
            seen = _file_state(path)  # before it is read: a change after is seen
            as_it_is = _connect(uri(path, read_only=True, immutable=True), AsItIs)
            assert isinstance(as_it_is, AsItIs)
            as_it_is.seen = seen
            return as_it_is
    return conn


class AsItIs(sqlite3.Connection):
    """A connection that reads the file as it is (immutable): right only while no
    writer is at work and the file is as it was when connected (``seen``), which
    `renewed` looks for."""

    seen: tuple[int, int, int] | None = None


def _file_state(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def renewed(path: Path, conn: sqlite3.Connection) -> sqlite3.Connection:
    """``conn``, or once a writer came (a -wal beside the file) a connection that reads
    what it writes (it made the -shm a reader needs): an immutable one would go on
    reading the file as unchanging, blind to every commit, or read it half-written.
    A writer that came and went (the file changed, no -wal left) gets the file read
    as it is now."""
    if not isinstance(conn, AsItIs):
        return conn
    if not path.with_name(path.name + "-wal").exists() and _file_state(path) == conn.seen:
        return conn
    try:
        fresh = connect(path, read_only=True)
        fresh.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.Error:
        return conn  # not readable so yet (the writer is still starting): as it is
    fresh.execute("PRAGMA query_only = ON")
    conn.close()
    return fresh


def _connect(
    address: str, factory: type[sqlite3.Connection] = sqlite3.Connection
) -> sqlite3.Connection:
    conn = sqlite3.connect(
        address, uri=True, isolation_level=None, check_same_thread=False, factory=factory
    )
    conn.execute("PRAGMA busy_timeout = 10000")
    return conn


def is_store_file(store: Path, target: Path) -> bool:
    """Whether writing ``target`` would write over the SQLite store ``store``: its file
    or one SQLite keeps beside it (``-wal``, ``-shm``, ``-journal``), by any name."""
    return any(
        same_path(target, store.with_name(store.name + suffix))
        for suffix in ("", "-wal", "-shm", "-journal")
    )


def same_path(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once resolved, or two names
    (hard links) of one existing file."""
    if a.resolve() == b.resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return False


def check_file(path: Path, *, must_exist: bool, writing: bool = False) -> bool:
    """Look at ``path`` without changing it; True if it holds a Corral store, False if it
    is absent or empty (a new store may be made there, unless it ``must_exist``).
    Anything else is a `ConfigError`.

    A store opened for ``writing`` first has the transaction a writer that died left
    in its hot journal rolled back, which a read-only look cannot do (as any SQLite
    connection that may write would on its first read): else a run killed as it made
    the file left a store refused as read-only for good.
    """
    where = repr(str(path))
    if path.is_dir():
        raise ConfigError(f"store path {where} is a directory, not a file")
    if path.exists() and not path.is_file():  # SQLite would wait on a pipe, fail on a device
        raise ConfigError(f"store path {where} is not a regular file (a device, a pipe, a socket)")
    if not path.exists():
        if must_exist:
            raise ConfigError(f"no store at {where} (the path does not exist)")
        return False
    try:
        with closing(connect(path, read_only=True)) as conn:
            tables = frozenset(
                name
                for (name,) in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND name NOT LIKE 'sqlite_%'"
                )
            )
            if not tables:
                if must_exist:
                    raise ConfigError(f"store path {where} is empty, not a Corral store")
                return False
            if tables not in TABLES.values():
                listed = ", ".join(sorted(tables))
                raise ConfigError(
                    f"store path {where} is an SQLite database but not a Corral store "
                    f"(its tables: {listed}); it was left unchanged"
                )
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        if writing and getattr(exc, "sqlite_errorname", "") == "SQLITE_READONLY_ROLLBACK":
            _roll_back(path)
            return check_file(path, must_exist=must_exist)
        raise ConfigError(f"store path {where} {problem(exc)}; it was left unchanged") from exc
    version = row[0] if row is not None else None
    if (
        row is None
        or not isinstance(version, str)
        or not (version.isascii() and version.isdigit())
        or tables != TABLES.get(int(version))
    ):
        found = "no schema version" if row is None else f"schema version {row[0]}"
        raise ConfigError(
            f"store path {where} has {found}; this Corral reads versions 1 to {SCHEMA_VERSION}"
        )
    return True


def _roll_back(path: Path) -> None:
    """Roll back the transaction left in ``path``'s hot journal by a writer that died:
    SQLite does so as a connection that may write first reads the file."""
    try:
        with closing(_connect(uri(path, read_only=False))) as conn:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
    except sqlite3.DatabaseError as exc:
        raise open_error(path, exc) from exc


@contextmanager
def write_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        # SQLite rolls back by itself on some errors (a full disk); a second
        # ROLLBACK would raise and hide the error that matters.
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    return getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL" or "disk is full" in str(exc)


#: SQLite's I/O errors of a write: the OS refused to write the file (a disk quota, the
#: file's size limit, EIO), where only a full disk (ENOSPC) reads as SQLITE_FULL.
_WRITE_ERRORS = frozenset(
    {"SQLITE_IOERR_WRITE", "SQLITE_IOERR_FSYNC", "SQLITE_IOERR_DIR_FSYNC", "SQLITE_IOERR_TRUNCATE"}
)


def write_refused(exc: BaseException) -> bool:
    return getattr(exc, "sqlite_errorname", "") in _WRITE_ERRORS


def problem(exc: BaseException) -> str:
    """What an error from SQLite or the OS says about the store, as a phrase."""
    name = getattr(exc, "sqlite_errorname", "")
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    if disk_full(exc):
        return f"cannot be written: disk full ({text})"
    if write_refused(exc):
        return f"cannot be written ({text}; a disk quota or the file size limit may be reached)"
    if name == "SQLITE_READONLY_ROLLBACK":  # not the file's permissions: a hot journal
        return (
            "holds a transaction a writer that died left unfinished, which only a "
            "writer can roll back (open it once for writing)"
        )
    if name.startswith("SQLITE_READONLY") or (
        isinstance(exc, OSError) and exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM)
    ):
        return f"is read-only ({text}); it can still be read (read_only=True)"
    if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT") or "not a database" in text:
        return f"is corrupt or not an SQLite database ({text})"
    if name.startswith(("SQLITE_CANTOPEN", "SQLITE_IOERR")):
        return f"cannot be opened or read ({text})"
    return f"failed: {text}"


def store_error(path: Path, exc: BaseException) -> StoreError:
    """``exc`` (from sqlite3 or the OS) as one line naming the store and what is wrong."""
    if isinstance(exc, sqlite3.Error) and str(exc).startswith("Could not decode to UTF-8"):
        # Corral writes only UTF-8: text that is not was written behind its back.
        return StoreCorrupt(f"store {str(path)!r} is corrupt: {exc}")
    return StoreError(f"store {str(path)!r} {problem(exc)}")


def open_error(path: Path, exc: BaseException) -> CorralError:
    """An error while opening: the path is bad input (`ConfigError`), unless the disk is
    full or a write was refused."""
    if disk_full(exc) or write_refused(exc):
        return store_error(path, exc)
    return ConfigError(f"store path {str(path)!r} {problem(exc)}")


class Identity(NamedTuple):
    """What names one file, whichever path reaches it."""

    directory: Path  # the real (symlink-free) directory that holds it
    device: int
    inode: int


def identity(path: Path) -> Identity:
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(real)
    except OSError as exc:
        raise StoreError(f"store {str(path)!r} is gone ({exc.strerror})") from exc
    return Identity(real.parent, st.st_dev, st.st_ino)


def check_still_there(path: Path, expected: Identity) -> None:
    """Raise if the file at ``path`` was deleted or replaced since it was opened:
    SQLite would go on writing to the unlinked file, and every commit would be lost."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is None or (st.st_dev, st.st_ino) != (expected.device, expected.inode):
        raise StoreError(
            f"store {str(path)!r} was deleted or replaced while open; nothing more is written to it"
        )


def same_file(path: Path, expected: Identity) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (expected.device, expected.inode)


def settle_home(conn: sqlite3.Connection, path: Path) -> Path:
    """The store file's home, recorded in its ``meta`` table: the real path it was first
    opened for writing at (or, once that path names another file or none, this one).

    Claims are kept beside the home, so every path to the file reaches the same
    locks: a symlink, and a hard link in another folder too (which has no real
    path in common with the first). ``conn`` must be a writer.
    """
    found = identity(path)
    home = recorded_home(conn, found)
    if home is not None:
        return home
    with write_transaction(conn):
        home = recorded_home(conn, found)  # another writer's, written meanwhile
        if home is None:
            home = Path(os.path.realpath(path))
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('home', ?)", (str(home),)
            )
    return home


def recorded_home(conn: sqlite3.Connection, found: Identity) -> Path | None:
    """The home ``meta`` records, if it is the file ``found`` (None: none, or stale)."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'home'").fetchone()
    if row is not None and same_file(Path(row[0]), found):
        return Path(row[0])
    return None


def claims_folder(path: Path, home: Path | None) -> tuple[Path, Identity]:
    """Where claims on the store file at ``path`` are kept (beside its home while the
    home is this file, else beside its real path), and the file's identity."""
    found = identity(path)
    if home is not None and same_file(home, found):
        return home.parent / ".corral-claims", found
    return found.directory / ".corral-claims", found
