"""A private PostgreSQL server for tests that stop and restart it.

Made with the machine's own binaries (``initdb``, ``pg_ctl``) in a temporary
directory, on a port of its own, so the shared server on 5432 is never
disturbed. PostgreSQL refuses to run as root; as root the server runs as the
``postgres`` system user. Where the binaries are missing the tests skip, except
under ``CI=true``, where that is a failure.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), reverse=True)
    if found:
        return Path(found[0]).parent
    pg_ctl = shutil.which("pg_ctl")
    return Path(pg_ctl).parent if pg_ctl else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PrivateServer:
    def __init__(self, bindir: Path, root: Path) -> None:
        self.bindir = bindir
        self.data = root / "data"
        self.log = root / "server.log"
        self.port = _free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            shutil.chown(root, "postgres", "postgres")

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self.as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed: {done.stdout}{done.stderr}{log}")

    def init(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.data} "
            "-c fsync=on -c max_connections=50"
        )
        # -w: returns once the server accepts connections
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")


def private_server() -> Iterator[PrivateServer]:
    bindir = _bindir()
    if bindir is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true, but PostgreSQL's initdb/pg_ctl are not installed")
        pytest.skip("PostgreSQL's initdb/pg_ctl are not installed")
    root = Path(tempfile.mkdtemp(prefix="corral-pg-"))
    server = PrivateServer(bindir, root)
    try:
        server.init()
        server.start()
        yield server
    finally:
        try:
            server.stop("immediate")
        except RuntimeError:
            pass  # already stopped
        shutil.rmtree(root, ignore_errors=True)
