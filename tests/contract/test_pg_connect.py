"""Connecting to PostgreSQL: a definite refusal is one error at once, a transient
failure is retried (and said so) for a window the URI may set."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from corral import ConfigError, PostgresStore, StoreError
from corral.cli import main
from corral.store import _pg_writer

from ..support import pg

ROOT = Path(__file__).resolve().parents[2]


class FakeTime:
    """The writer's clock: a backoff advances it instead of waiting."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(_pg_writer, "time", fake)
    return fake


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("uri", "named"),
    [
        ("{server}/nosuchdb_{tag}", 'database "nosuchdb_{tag}" does not exist'),
        ("postgresql://nobody_{tag}@127.0.0.1:5432/postgres", 'role "nobody_{tag}" does not exist'),
    ],
)
@pytest.mark.parametrize(
    "command", [["list"], ["report", "b"], ["view", "--export", "b", "-o", "x.html"]]
)
def test_a_definite_refusal_is_one_error_at_once(
    uri: str, named: str, command: list[str], clock: FakeTime
) -> None:
    pg.require_server()
    tag = uuid.uuid4().hex[:8]
    result = _invoke(*command, "--store", uri.format(server=pg.SERVER, tag=tag))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert named.format(tag=tag) in lines[0]
    assert clock.slept == []  # not retried


def test_a_host_that_does_not_resolve_is_a_config_error_at_once(clock: FakeTime) -> None:
    with pytest.raises(ConfigError, match="resolve host 'no-such-host.invalid'"):
        anyio.run(_open, PostgresStore("postgresql://no-such-host.invalid/db"))
    assert clock.slept == []


async def _open(store: PostgresStore) -> None:
    async with store.opened():
        pass


def test_a_transient_failure_is_retried_and_said_so(
    clock: FakeTime, caplog: pytest.LogCaptureFixture
) -> None:
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{_closed_port()}/db")
    with caplog.at_level(logging.WARNING), pytest.raises(StoreError) as caught:
        anyio.run(_open, store)
    assert "stayed unreachable for 30 s" in str(caught.value)
    assert sum(clock.slept) == pytest.approx(30)
    notices = [r for r in caplog.records if r.name.startswith("corral")]
    assert notices and all(r.levelno == logging.WARNING for r in notices)
    first = notices[0].getMessage()
    assert first.startswith(f"connecting to {store!r} (retrying, 0 s of 30 s)")
    assert "Connection refused" in first
    # Not a line per attempt: one every few seconds of the window.
    assert 4 <= len(notices) <= 8, [r.getMessage() for r in notices]


@pytest.mark.parametrize(("given", "window"), [("retry_for=2.5", 2.5), ("retry_for=0", 0.0)])
def test_the_uri_sets_the_retry_window(given: str, window: float, clock: FakeTime) -> None:
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{_closed_port()}/db?{given}")
    assert store.retry_for == window
    with pytest.raises(StoreError, match=f"stayed unreachable for {window:g} s"):
        anyio.run(_open, store)
    assert sum(clock.slept) == pytest.approx(window)


def test_the_uri_s_retry_window_keeps_the_other_parameters(pg_dsn: str) -> None:
    store = PostgresStore(f"{pg_dsn}?application_name=a%20b&retry_for=1&connect_timeout=5")
    assert store.retry_for == 1
    assert "retry_for" not in store.conninfo
    assert store.conninfo.endswith("?application_name=a%20b&connect_timeout=5")
    anyio.run(_open, store)


@pytest.mark.parametrize("bad", ["retry_for=soon", "retry_for=-1", "retry_for=nan"])
def test_a_bad_retry_window_is_a_config_error(bad: str) -> None:
    with pytest.raises(ConfigError, match=bad.partition("=")[2]):
        PostgresStore(f"postgresql://h/db?{bad}")


@pytest.mark.parametrize("bad", ["soon", True, float("nan"), -1])
def test_a_bad_retry_for_argument_is_a_config_error(bad: object) -> None:
    """As the URI's: `retry_for="soon"` was a TypeError from comparing it with 0, and
    True or nan were taken (nan: a retry window that never ends nor begins)."""
    with pytest.raises(ConfigError, match=f"retry_for must be >= 0 seconds, not {bad!r}"):
        PostgresStore("postgresql://h/db", retry_for=bad)  # type: ignore[arg-type]


@pytest.mark.slow  # starts a process: a system test
def test_the_cli_says_it_is_retrying_on_stderr() -> None:
    uri = f"postgresql://postgres@127.0.0.1:{_closed_port()}/db?retry_for=0.3"
    done = subprocess.run(
        [sys.executable, "-m", "corral", "list", "--store", uri],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        timeout=60,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("connecting to PostgresStore(") and "(retrying, 0 s" in lines[0]
    assert lines[-1].startswith("error: ") and "stayed unreachable for 0.3 s" in lines[-1]
    assert "Traceback" not in done.stderr


pg_dsn = pg.pg_dsn


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u@127.0.0.1/db?PASSWORD=sekret",  # names are case-insensitive
        "postgresql://u@127.0.0.1/db?Password=sekret&bogus=1",
        "postgresql://u:pa?sekret@127.0.0.1",  # a raw '?' in the password; no database
        "postgresql://u:sekret%zz@127.0.0.1/db",  # psycopg quotes the bad token
        # A raw '@' in a parameter's password, no '/': taken for the user info's end.
        "postgresql://127.0.0.1?password=sekret@x",
    ],
)
def test_no_refusal_shows_the_password(dsn: str) -> None:
    with pytest.raises(ConfigError) as caught:
        PostgresStore(dsn)
    assert "sekret" not in str(caught.value) and "***" in str(caught.value)


@pytest.mark.parametrize(
    "dsn",
    [
        # Not percent-encoded, as a generated password often is not: libpq then reads the
        # password's pieces as a host, a port or a database, and messages quote them.
        "postgresql://u:Zq1x/Wy2z@127.0.0.1/db",
        "postgresql://u:Zq1x@Wy2z@127.0.0.1/db",
        "postgresql://u:Zq1x@Wy2z@127.0.0.1/db?application_name=a@b",
    ],
)
def test_a_password_with_a_raw_slash_or_at_sign_is_never_shown(dsn: str) -> None:
    store = PostgresStore(dsn, retry_for=0)
    assert "Zq1x" not in repr(store) and "Wy2z" not in repr(store)
    with pytest.raises((ConfigError, StoreError)) as caught:
        anyio.run(_opened, store)
    shown = str(caught.value)
    assert "Zq1x" not in shown and "Wy2z" not in shown and "***" in shown


async def _opened(store: PostgresStore) -> None:
    async with store.opened():
        pass


@pytest.mark.parametrize(
    ("dsn", "secret"),
    [
        # A piece of one or two characters (after a raw "@") was left unmasked, though
        # libpq read it as the start of the host name its error quotes.
        ("postgresql://u:Zq1x@Wy@127.0.0.1/db", "Wy@"),
        ("postgresql://u:Zq1x@W@127.0.0.1/db", "W@"),
    ],
)
def test_a_short_piece_of_a_password_with_a_raw_at_sign_is_never_shown(
    dsn: str, secret: str
) -> None:
    with pytest.raises((ConfigError, StoreError)) as caught:
        anyio.run(_opened, PostgresStore(dsn, retry_for=0))
    shown = str(caught.value)
    assert secret not in shown and "***" in shown, shown


def test_a_password_of_two_characters_leaves_the_rest_of_a_message_readable() -> None:
    """Masked wherever its two characters occurred, a message said 'dat***ase'."""
    from corral.store.postgres import masked

    dsn = "postgresql://u:ab@127.0.0.1:1/db"
    said = 'connection to database "db" failed: password "ab" refused'
    assert masked(said, dsn) == 'connection to database "db" failed: password "***" refused'


@pytest.mark.parametrize(
    "dsn",
    [
        "postgresql://u:sekret@127.0.0.1:5432/db@x",
        "postgresql://u@127.0.0.1:5432/db@x",
        "postgresql://127.0.0.1:5432/db@x",
    ],
)
def test_a_database_named_with_an_at_sign_is_shown_with_its_host(dsn: str) -> None:
    """An "@" in the database's name (libpq reads it so) was taken for the end of a
    password: the store was shown as 'postgresql://u:***@x', and its host, port and
    database masked in every message as if pieces of the password."""
    from corral.store.postgres import masked

    store = PostgresStore(dsn)
    assert repr(store) == f"PostgresStore({dsn.replace('sekret', '***')!r})"
    said = 'connection to server at "127.0.0.1", port 5432 failed: database "db@x"'
    assert masked(said, dsn) == said
