"""``corral view``: serve the results viewer, or export one benchmark as a single file."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .._errors import ConfigError
from ..store import CommitStore
from ..store._sqlite_file import is_store_file
from ._inspect import reading_store, with_store
from ._options import store_option

if TYPE_CHECKING:
    import uvicorn


@click.command("view")
@store_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Anything but loopback lets whoever reaches it read "
    "every benchmark in the store.",
)
@click.option("--port", default=8765, show_default=True, type=int, help="0: any free port.")
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="NAME",
    help="Answer requests for this host name too (repeatable); by default only "
    "localhost, 127.0.0.1, [::1] and --host are (a guard against DNS rebinding).",
)
@click.option("--export", "export_id", metavar="ID", help="Write benchmark ID as one HTML file.")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file --export writes.",
)
def view_command(
    store: str,
    host: str,
    port: int,
    allow_hosts: tuple[str, ...],
    export_id: str | None,
    output: Path | None,
) -> None:
    """Browse the store's results in a web browser (read-only, loopback by default).

    With --export ID -o FILE.html, write that benchmark as one self-contained page
    (data inline, no server, no network) to share; it compares the models of a
    several-models run, but comparing two benchmarks needs the server.
    """
    # The viewer builds on the CLI's readers (history, k values): imported when used.
    from ..view import export_html
    from ..view._hosts import allowed_hosts

    if export_id is not None:
        if output is None:
            raise ConfigError("--export needs -o FILE.html: where to write the page")
        if not output.name or output.is_dir():  # `-o ""` arrives as Path(".")
            raise ConfigError(f"-o {str(output)!r} is a folder, not a file to write the page to")
        if not output.parent.is_dir():  # found before the benchmark is read, not after
            raise ConfigError(
                f"-o {str(output)!r}: there is no folder {str(output.parent)!r} to write it in"
            )
        _not_the_store(store, output)
        page = with_store(store, lambda s: export_html(s, export_id))
        output.write_text(page, encoding="utf-8")
        click.echo(f"wrote {output} ({len(page.encode()):,} bytes): open it in a browser")
        return
    if output is not None:
        raise ConfigError("-o is for --export; the viewer is served, not written")
    hosts = allowed_hosts(host, allow_hosts)
    serve(reading_store(store), host, port, hosts)


def _not_the_store(where: str, output: Path) -> None:
    """A `ConfigError` if ``output`` is the store's own file (or one SQLite keeps beside
    it): an export reads the store, it never writes over it."""
    path = getattr(reading_store(where), "path", None)
    if path is None:
        return
    if is_store_file(Path(path), output):
        raise ConfigError(
            f"-o {str(output)!r} is the store's own file: the page would replace the "
            "store; give another file (page.html)"
        )


def listening_socket(host: str, port: int) -> socket.socket:
    """A socket listening on (host, port); a `ConfigError` naming what cannot be used."""
    if not 0 <= port <= 65535:
        raise ConfigError(f"--port {port} is outside 0..65535")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as exc:
        raise ConfigError(f"--host {host!r} is not an address this machine knows: {exc}") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def is_loopback(sock: socket.socket) -> bool:
    return ipaddress.ip_address(sock.getsockname()[0]).is_loopback


def serve(store: CommitStore, host: str, port: int, hosts: Sequence[str]) -> None:
    """Serve the viewer over ``store`` until interrupted, to requests naming ``hosts``."""
    try:
        import uvicorn

        from ..view import create_app
    except ImportError as exc:
        raise ConfigError(
            f"corral view needs the viewer's extra ({exc.name} is missing): "
            "pip install 'corral[view]'"
        ) from None
    # Ctrl-C does not wait for a long poll on a benchmark still being read.
    config = uvicorn.Config(
        create_app(store, allowed_hosts=hosts),
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=1,
    )
    asyncio.run(_serve(store, uvicorn.Server(config), host, port, hosts))


async def _serve(
    store: CommitStore, server: uvicorn.Server, host: str, port: int, hosts: Sequence[str]
) -> None:
    # Opened here first (the app opens it again, sharing it): a store that cannot be
    # opened is one error line, not a server whose start-up dies with a traceback.
    async with store.opened():
        sock = listening_socket(host, port)
        try:
            name, bound = sock.getsockname()[:2]
            shown = f"[{name}]" if ":" in name else name
            if not is_loopback(sock):
                click.echo(
                    f"warning: listening on {name}, not loopback: anyone who can reach it "
                    "can read every benchmark in the store (requests must name "
                    f"{', '.join(hosts)}; --allow-host NAME adds one)",
                    err=True,
                )
            click.echo(f"serving http://{shown}:{bound}/ (read-only; Ctrl-C stops)")
            await server.serve(sockets=[sock])
        finally:
            sock.close()
