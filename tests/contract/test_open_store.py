"""`corral.open_store`: the one place an address becomes a store, and what the CLI
makes of addresses (an unknown scheme, a store that must exist)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import corral
from corral import ConfigError, MemoryStore, PostgresStore, SQLiteStore
from corral.cli import main

from ..unit.test_cli import BENCH


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _refused(*args: Any) -> str:
    result = _invoke(*args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def _bench(tmp_path: Path) -> Path:
    path = tmp_path / "bench.py"
    path.write_text(BENCH.replace("{RUN_DEFAULTS}", '{"trials_per_task": 1}'))
    return path


@pytest.mark.parametrize(
    ("address", "kind", "where"),
    [
        ("runs/store.db", SQLiteStore, "runs/store.db"),
        ("sqlite:///runs/store.db", SQLiteStore, "runs/store.db"),
        ("sqlite:////tmp/store.db", SQLiteStore, "/tmp/store.db"),
        (Path("runs/store.db"), SQLiteStore, "runs/store.db"),
        ("memory:", MemoryStore, None),
        (":memory:", MemoryStore, None),
        ("postgresql://me@db.example/bench", PostgresStore, None),
        ("postgres://me@db.example/bench", PostgresStore, None),
        # Schemes are case-insensitive (RFC 3986); the path keeps its case.
        ("SQLITE:///runs/Store.db", SQLiteStore, "runs/Store.db"),
        ("Postgresql://me@db.example/bench", PostgresStore, None),
        ("MEMORY:", MemoryStore, None),
    ],
)
def test_an_address_becomes_its_store(address: str, kind: type, where: str | None) -> None:
    store = corral.open_store(address)
    assert type(store) is kind
    if where is not None:
        assert store.path == Path(where)  # type: ignore[attr-defined]
    if kind is PostgresStore:  # libpq knows its schemes in lower case only
        assert store.dsn.startswith(("postgresql://", "postgres://"))  # type: ignore[attr-defined]


@pytest.mark.parametrize("address", ["mysql://x@y/z", "SQLITE3:///x.db", "file:///tmp/x.db"])
def test_an_unknown_scheme_is_refused_naming_the_known_ones(address: str) -> None:
    with pytest.raises(ConfigError) as caught:
        corral.open_store(address)
    message = str(caught.value)
    assert repr(address) in message
    for known in ("sqlite:///", "postgresql://", "memory:"):
        assert known in message


PG = "postgresql://me@db.example/bench"


@pytest.mark.parametrize(
    ("address", "keywords", "named"),
    [
        ("s.db", {"read_only": "no"}, "read_only must be True or False, not 'no'"),
        ("s.db", {"create": "false"}, "create must be True or False, not 'false'"),
        ("memory:", {"read_only": 1}, "read_only must be True or False, not 1"),
        (PG, {"read_only": "no"}, "read_only must be True or False, not 'no'"),
        (PG, {"create": None}, "create must be True or False, not None"),
        (PG, {"synchronous_commit": "off"}, "synchronous_commit must be True or False, not 'off'"),
    ],
)
def test_a_flag_that_is_not_true_or_false_is_refused_naming_it(
    tmp_path: Path, address: str, keywords: dict[str, Any], named: str
) -> None:
    """Each was read by its truth: ``read_only="no"`` opened a store read-only,
    ``create="false"`` made the file, ``synchronous_commit="off"`` committed
    synchronously. Refused before anything is made, by the backends' classes too."""
    where = str(tmp_path / address) if address == "s.db" else address
    with pytest.raises(ConfigError, match=re.escape(named)):
        corral.open_store(where, **keywords)
    if address != "memory:":
        kind = SQLiteStore if address == "s.db" else PostgresStore
        with pytest.raises(ConfigError, match=re.escape(named)):
            kind(where, **keywords)
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_synchronous_is_refused_listing_every_level_taken(tmp_path: Path) -> None:
    """OFF is taken (a benchmark's fixtures use it), so the refusal lists it too: it
    listed NORMAL, FULL and EXTRA only."""
    with pytest.raises(ConfigError, match="must be OFF, NORMAL, FULL or EXTRA, not 'off'"):
        SQLiteStore(tmp_path / "s.db", synchronous="off")  # type: ignore[arg-type]
    assert SQLiteStore(tmp_path / "s.db", synchronous="OFF").synchronous == "OFF"
    assert list(tmp_path.iterdir()) == []


def test_the_runner_takes_an_address_through_open_store() -> None:
    with pytest.raises(ConfigError, match="mysql://x@y/z"):
        corral.CorralRunner({}, {}, {}, store="mysql://x@y/z")
    assert isinstance(corral.CorralRunner({}, {}, {}, store="memory:").store, MemoryStore)


def test_run_with_an_unknown_scheme_is_refused_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = _bench(tmp_path)
    monkeypatch.chdir(tmp_path)
    line = _refused("run", bench, "--store", "mysql://x@y/z", "--no-progress")
    assert "mysql://x@y/z" in line and "postgresql://" in line
    made = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")  # Python's
    assert made == ["bench.py"]


def test_a_store_option_that_does_not_fit_its_backend_is_refused() -> None:
    with pytest.raises(ConfigError, match="retry_for"):
        corral.open_store("x.db", retry_for=3)


@pytest.mark.parametrize("command", [["list"], ["report", "b"], ["show", "b", "t", "0"], ["view"]])
def test_reading_with_an_unknown_scheme_names_the_known_ones(command: list[str]) -> None:
    line = _refused(*command, "--store", "mysql://x@y/z")
    assert "'mysql://x@y/z'" in line and "postgresql://" in line


def test_rescore_of_a_missing_store_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "store.db"
    line = _refused("rescore", "b", _bench(tmp_path), "--store", missing, "--no-progress")
    assert f"no store at '{missing}'" in line
    assert not missing.parent.exists()


def test_rescore_of_an_empty_file_is_refused_and_leaves_it_empty(tmp_path: Path) -> None:
    # A typo naming another (empty) file: rescore writes to a store, never makes one.
    empty = tmp_path / "store.db"
    empty.touch()
    line = _refused("rescore", "b", _bench(tmp_path), "--store", empty, "--no-progress")
    assert f"store path '{empty}' is empty, not a Corral store" in line
    assert empty.stat().st_size == 0
    made = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")  # Python's
    assert made == ["bench.py", "store.db"]


@pytest.mark.anyio
async def test_a_store_opened_with_create_false_never_makes_one(tmp_path: Path) -> None:
    empty = tmp_path / "store.db"
    empty.touch()
    store = corral.open_store(empty, create=False)
    with pytest.raises(ConfigError, match="is empty, not a Corral store"):
        async with store.opened():
            pass
    assert empty.stat().st_size == 0
    made = corral.open_store(tmp_path / "made.db")
    async with made.opened():
        pass
    async with corral.open_store(tmp_path / "made.db", create=False).opened():
        pass


@pytest.mark.parametrize(
    "command", [["list"], ["report", "b"], ["show", "b", "t", "0"], ["view"], ["rescore", "b"]]
)
def test_a_command_that_reads_a_missing_file_says_so(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "store.db"
    if command[0] == "rescore":
        command = [*command, str(_bench(tmp_path)), "--no-progress"]
    line = _refused(*command, "--store", missing)
    assert f"no store at '{missing}'" in line
    assert not missing.exists()


@pytest.mark.parametrize(
    "command",
    [
        ["list"],
        ["report", "b"],
        ["show", "b", "t", "0"],
        ["view"],
        ["view", "--export", "b", "-o", "page.html"],
        ["compare", "a", "b"],
        ["rescore", "b"],
        ["copy"],
    ],
)
def test_a_command_that_reads_a_typoed_folder_makes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    missing = Path("runz") / "store.db"  # a typo of the folder
    if command[0] == "rescore":
        command = [*command, str(_bench(tmp_path)), "--no-progress"]
    args = [*command, missing, "out.db"] if command == ["copy"] else [*command, "--store", missing]
    line = _refused(*args)
    assert f"no store at '{missing}'" in line
    made = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")  # Python's
    assert made == (["bench.py"] if command[0] == "rescore" else [])


@pytest.mark.parametrize(
    "address", ["postgresql://", "postgresql://127.0.0.1", "postgres://me@db.example:5432/"]
)
def test_a_postgres_uri_without_a_database_is_refused(address: str) -> None:
    with pytest.raises(ConfigError, match="database") as caught:
        corral.open_store(address)
    assert repr(address) in str(caught.value)


@pytest.mark.parametrize("address", ["postgresql:///bench", "postgresql://h/?dbname=bench"])
def test_a_database_named_anywhere_in_the_uri_is_enough(address: str) -> None:
    assert isinstance(corral.open_store(address), PostgresStore)


@pytest.mark.parametrize("address", ["sqlite://x.db", "sqlite:///x.db?mode=ro", "sqlite:///x.db#a"])
def test_a_malformed_sqlite_address_is_refused(address: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=re.escape(repr(address))):
        corral.open_store(address)


@pytest.mark.parametrize("address", ["", "sqlite:///"])
def test_an_address_naming_no_file_is_refused_as_given(address: str) -> None:
    """An empty path became ``Path(".")``: `open_store("")` took it without a word, and
    ``corral list --store ""`` said "no store at '.'", a value nobody gave."""
    with pytest.raises(ConfigError, match=re.escape(repr(address))):
        corral.open_store(address)


@pytest.mark.parametrize("command", [["list"], ["report", "b"], ["run", "bench.py"]])
def test_an_empty_store_flag_is_refused_naming_it(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _bench(tmp_path)
    monkeypatch.chdir(tmp_path)
    line = _refused(*command, "--store", "")
    assert "''" in line and "'.'" not in line, line
    made = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")
    assert made == ["bench.py"]


@pytest.mark.parametrize("given", ["", 7, None])
def test_an_sqlite_store_of_no_path_is_refused_naming_it(
    given: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`open_store("")` is refused naming ''; `SQLiteStore("")`, the class the README
    shows, became the folder '.' and was refused only as it opened, naming '.' (and
    `SQLiteStore(7)` was a TypeError)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=re.escape(repr(given))) as refused:
        SQLiteStore(given)
    assert "'.'" not in str(refused.value)
    assert list(tmp_path.iterdir()) == []


def test_ray_hosts_open_the_coordinator_s_store_through_open_store(tmp_path: Path) -> None:
    from corral.executor._stores import spec_of

    pg = PostgresStore("postgresql://me@db.example/bench?retry_for=5", synchronous_commit=False)
    again = spec_of(pg, "b").open()
    assert isinstance(again, PostgresStore) and again.dsn == pg.dsn
    assert (again.retry_for, again.synchronous_commit) == (5, False)
    lite = spec_of(SQLiteStore(tmp_path / "s.db", synchronous="FULL"), "b").open()
    assert isinstance(lite, SQLiteStore)
    assert (lite.path, lite.synchronous) == (tmp_path / "s.db", "FULL")


def test_a_folder_is_no_store_to_read(tmp_path: Path) -> None:
    assert "(not a file)" in _refused("list", "--store", tmp_path)


def test_what_a_backend_can_do_is_asked_of_its_capabilities_not_its_class(
    tmp_path: Path,
) -> None:
    from corral.executor._stores import check_reach, check_store
    from corral.store import FileStore, SharedStore

    lite = SQLiteStore(tmp_path / "s.db")
    pg = PostgresStore("postgresql://me@db.example/bench")
    memory = MemoryStore()
    assert [isinstance(s, SharedStore) for s in (lite, pg, memory)] == [True, True, False]
    assert [isinstance(s, FileStore) for s in (lite, pg, memory)] == [True, False, False]
    assert (lite.host_access("b").reach, pg.host_access("b").reach) == ("machine", "network")
    assert pg.host_access("b").epoch is None  # no claim held: nothing for hosts to join
    with pytest.raises(ConfigError, match="Ray hosts cannot write"):
        check_store(memory)
    with pytest.raises(ConfigError, match="a file on this machine"):
        check_reach(lite, all_local=False)
    check_reach(pg, all_local=False)
    check_reach(lite, all_local=True)


@pytest.mark.parametrize("command", [["run", "BENCH", "--no-progress"], ["list"]])
def test_libpqs_key_value_form_is_refused_without_its_password_and_creates_nothing(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``host=... password=... dbname=...`` (libpq's other form) was taken for a file
    path: ``run`` made an SQLite file named by it, password and all, and the reading
    commands said 'no store at' it, showing the password."""
    bench = _bench(tmp_path)
    monkeypatch.chdir(tmp_path)
    address = "host=127.0.0.1 user=corral password=sekrit dbname=evals"
    args = [str(bench) if a == "BENCH" else a for a in command]
    line = _refused(*args, "--store", address)
    assert "sekrit" not in line and "postgresql://" in line, line
    made = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")
    assert made == ["bench.py"]


@pytest.mark.parametrize(
    "address",
    [
        "sslmode=disable host=127.0.0.1 user=corral password=sekrit dbname=evals",
        "connect_timeout=5 host=127.0.0.1 password=sekrit dbname=evals",
        "application_name=evals password=sekrit host=127.0.0.1",
    ],
)
def test_libpqs_key_value_form_is_refused_whichever_keyword_comes_first(
    address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq takes its keywords in any order: one starting with ``sslmode=`` (or any
    keyword but host, hostaddr, port, dbname, user, password and service) was still
    taken for a file path, and ``run`` made an SQLite file named by it, password and all."""
    bench = _bench(tmp_path)
    monkeypatch.chdir(tmp_path)
    line = _refused("run", str(bench), "--no-progress", "--store", address)
    assert "sekrit" not in line and "postgresql://" in line, line
    made = sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__")
    assert made == ["bench.py"]


def test_a_file_named_like_a_libpq_keyword_is_told_how_to_be_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store file named ``host=x.db`` is refused as libpq's key=value form; the
    refusal said only that a PostgreSQL address is a URI, never how to name the file."""
    monkeypatch.chdir(tmp_path)
    line = _refused("list", "--store", "host=x.db")
    assert "./" in line, line
