"""Parsing what click leaves to us: NAME=N limits, k lists; the shared --store option."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import click

from .._errors import ConfigError
from .._runner import DEFAULT_STORE
from ..store import CommitStore, scheme_of
from ..store import open_store as open_address

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


STORE_HELP = (
    "Where commits are kept: an SQLite file (a path or sqlite:///PATH), a PostgreSQL "
    "URI (postgresql://user@host/db), or memory: (kept nowhere). "
    "Default: $CORRAL_STORE, else " + DEFAULT_STORE + "."
)


def store_option(command: F) -> F:
    return click.option(
        "--store",
        envvar="CORRAL_STORE",
        default=DEFAULT_STORE,
        metavar="PATH|URI",
        help=STORE_HELP,
    )(command)


def durability_option(command: F) -> F:
    return click.option(
        "--durability",
        type=click.Choice(["process", "power"]),
        default="process",
        show_default=True,
        help="What an acknowledged commit survives: a crash of the process (SQLite "
        "synchronous=NORMAL), or also a power loss or OS crash (FULL: an fsync per batch).",
    )(command)


def open_store(where: str, durability: str, *, create: bool = True) -> CommitStore:
    """The store at ``where`` (`corral.open_store`), with --durability for SQLite
    (PostgreSQL always uses synchronous_commit: every acknowledged commit survives a
    crash of the server too). ``create=False``: it must exist (``rescore``)."""
    if scheme_of(where) == "sqlite":
        synchronous = "FULL" if durability == "power" else "NORMAL"
        return open_address(where, create=create, synchronous=synchronous)
    return open_address(where, create=create)


def read_store(where: str) -> CommitStore:
    """The store at ``where`` for the commands that only read: it must exist and is
    never changed, so a read-only file, folder or database role can read it; a
    missing file is a `ConfigError` now, a foreign or corrupt one when it is opened."""
    return open_address(where, read_only=True)


def k_option(command: F) -> F:
    """``-k``: repeatable or comma-separated; arrives as a tuple of ints (empty if not given)."""

    def parse(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> Any:
        return k_values(values)

    return click.option(
        "-k",
        "--k",
        "ks",
        multiple=True,
        callback=parse,
        metavar="K[,K...]",
        help="k of pass@k (repeatable, or 1,2,4).",
    )(command)


def keyed_limits(flag: str, values: Iterable[str]) -> dict[str, int]:
    """``("a=2", "b=3")`` as ``{"a": 2, "b": 3}``; a malformed item, or a name given two
    limits (one would be dropped unsaid), is a `ConfigError`."""
    out: dict[str, int] = {}
    for item in values:
        name, sep, number = item.rpartition("=")
        if not sep or not name:
            raise ConfigError(f"{flag}: expected NAME=N, not {item!r}")
        try:
            limit = int(number)
        except ValueError:
            raise ConfigError(f"{flag}: {number!r} in {item!r} is not an integer") from None
        if out.get(name, limit) != limit:
            raise ConfigError(f"{flag}: {name!r} is given twice: {out[name]} and {limit}")
        out[name] = limit
    return out


def k_values(values: Iterable[str]) -> tuple[int, ...]:
    """``-k 1 -k 2,4`` as ``(1, 2, 4)``."""
    out = []
    for value in values:
        for part in value.split(","):
            try:
                out.append(int(part))
            except ValueError:
                raise ConfigError(f"-k: {part.strip()!r} is not an integer") from None
    return tuple(out)


def run_async(job: Callable[[], Awaitable[T]]) -> T:
    """``anyio.run(job)``, its result handed back beside the event loop's main task
    rather than as that task's result: Python 3.11's asyncio formats the main task's
    repr (its result included) when it restores the SIGINT handler, which for a
    report of 100,000 tasks costs seconds."""
    out: list[T] = []

    async def main() -> None:
        out.append(await job())

    anyio.run(main)
    return out[0]


@dataclass(frozen=True)
class CliProcess:
    """What a command knows of the process it runs in (its root context's ``obj``).

    ``own``: run as the `corral` process itself, from its argv; not called from a
    caller's Python (a test's ``CliRunner``, a script), whose process settings, such as
    its garbage collector's (`corral._gc`), are not the command's to change."""

    own: bool = False


def owns_process() -> bool:
    """Whether the command being run is the `corral` process itself (`CliProcess`)."""
    ctx = click.get_current_context(silent=True)
    found = None if ctx is None else ctx.find_root().obj
    return isinstance(found, CliProcess) and found.own
