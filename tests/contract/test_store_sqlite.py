"""The SQLite store's file under attack: other paths to it, foreign, corrupt, read-only,
vanished and full files; and `benchmarks()` agreeing with a resume about reopened trials."""

from __future__ import annotations

import errno
import hashlib
import io
import math
import os
import sqlite3
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream
from bench.durable_bench import Log, runner

import corral
from corral import (
    BenchmarkBusyError,
    BenchmarkTaskMetadata,
    Commit,
    CommitStore,
    ConfigError,
    CorralRunner,
    Final,
    MemoryStore,
    RetryPolicy,
    SQLiteStore,
    StoreError,
    TrialKey,
)
from corral.store import sqlite as sqlite_store
from corral.store._sqlite_file import open_error, store_error
from corral.testing import FakeEnvironment, Gate, ScriptedAgent

from .test_store import CONFIG, trial

pytestmark = pytest.mark.anyio
K = TrialKey("bench", "task", 0)
ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def make_store(path: Path) -> None:
    store = SQLiteStore(path)
    async with store.opened():
        await store.register_benchmark("bench", CONFIG)
        await store.append(K, trial())


# -- the one-writer claim ------------------------------------------------------

SECOND_PATHS: dict[str, Callable[[Path], Path]] = {
    "symlink": lambda p: _link(p, os.symlink, "link.db"),
    "hard link": lambda p: _link(p, os.link, "hard.db"),
    "hard link in another folder": lambda p: _link(p, os.link, "sub/hard.db"),
    "dir/..": lambda p: p.parent / "sub" / ".." / p.name,
    "symlinked folder": lambda p: _link(p.parent, os.symlink, "alias") / p.name,
}


def _link(target: Path, how: Callable[[Path, Path], None], name: str) -> Path:
    link = target.parent / name
    how(target, link)
    return link


@pytest.mark.parametrize("second", list(SECOND_PATHS))
async def test_a_second_path_to_the_store_file_cannot_bypass_the_claim(
    tmp_path: Path, second: str
) -> None:
    path = tmp_path / "d" / "store.db"
    (tmp_path / "d" / "sub").mkdir(parents=True)
    await make_store(path)
    other = SECOND_PATHS[second](path)
    first, again = SQLiteStore(path), SQLiteStore(other)
    async with first.opened(), again.opened(), first.claim("bench"):
        with pytest.raises(BenchmarkBusyError, match="'bench'"):
            async with again.claim("bench"):
                pass
        async with again.claim("another"):  # other benchmarks are not held
            pass


HOLDER = """
import sys, anyio, corral
from corral import Commit, TrialKey

async def main():
    store = corral.SQLiteStore(sys.argv[1])
    async with store.opened(), store.claim("bench"):
        await store.append(TrialKey("bench", "task", 1), [Commit(0, "setup", {}, 1.0)])
        print("claimed", flush=True)
        sys.stdin.readline()

anyio.run(main)
"""


@pytest.mark.slow  # starts a process: a system test
async def test_a_hard_link_in_another_folder_meets_another_process_claim(
    tmp_path: Path,
) -> None:
    path = tmp_path / "d" / "store.db"
    (tmp_path / "elsewhere").mkdir()
    await make_store(path)
    link = tmp_path / "elsewhere" / "hard.db"
    os.link(path, link)
    command = [sys.executable, "-c", HOLDER, str(path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    async with await anyio.open_process(command, env=env) as holder:
        assert holder.stdin is not None and holder.stdout is not None
        said = b""
        while not said.endswith(b"\n"):
            said += await holder.stdout.receive()
        assert said == b"claimed\n"
        second = SQLiteStore(link)
        async with second.opened():
            with pytest.raises(BenchmarkBusyError, match="'bench' is being run by .*pid"):
                async with second.claim("bench"):
                    pass
        await holder.stdin.send(b"\n")
        assert await holder.wait() == 0


async def test_a_moved_store_keeps_its_claims_beside_its_new_place(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "new" / "sub").mkdir(parents=True)
    await make_store(tmp_path / "old" / "store.db")
    moved = tmp_path / "new" / "store.db"
    os.rename(tmp_path / "old" / "store.db", moved)
    (tmp_path / "old").rmdir()  # nothing left behind, nothing made there again
    first = SQLiteStore(moved)
    async with first.opened():  # its new home is recorded
        pass
    again = SQLiteStore(_link(moved, os.link, "sub/hard.db"))
    async with first.opened(), again.opened(), first.claim("bench"):
        with pytest.raises(BenchmarkBusyError, match="'bench'"):
            async with again.claim("bench"):
                pass
    assert (tmp_path / "new" / ".corral-claims").is_dir()
    assert not (tmp_path / "old").exists()


# -- what is at the path -------------------------------------------------------


async def test_a_foreign_sqlite_file_is_refused_and_never_modified(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with closing(sqlite3.connect(path)) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("INSERT INTO users VALUES ('ada')")
        db.commit()
    before = digest(path)
    with pytest.raises(ConfigError, match=f"{path}.*not a Corral store.*users"):
        async with SQLiteStore(path).opened():
            pass
    with pytest.raises(ConfigError, match="not a Corral store"):
        async with SQLiteStore(path, read_only=True).opened():
            pass
    assert digest(path) == before
    assert sorted(os.listdir(tmp_path)) == ["app.db"]  # no -wal, no locks


def crashed_in_first_write(path: Path) -> None:
    """Leave at ``path`` what a writer killed inside its first transaction leaves (a
    kill -9 as `corral run` makes a new store): pages of the file written, and the hot
    journal that undoes them. Copied while the transaction is open, so no process dies."""
    source = path.with_name("source.db")
    with closing(sqlite3.connect(source, isolation_level=None)) as db:
        db.execute("PRAGMA cache_size = 1")  # pages spill into the file before a commit
        db.execute("BEGIN IMMEDIATE")
        db.execute("CREATE TABLE half (x)")
        db.executemany("INSERT INTO half VALUES (?)", [("x" * 2000,)] * 50)
        assert source.stat().st_size > 0
        for suffix in ("", "-journal"):
            path.with_name(path.name + suffix).write_bytes(
                source.with_name(source.name + suffix).read_bytes()
            )
        db.execute("ROLLBACK")


async def test_a_new_store_whose_first_write_was_killed_opens(tmp_path: Path) -> None:
    """The run that made the file was killed in its first transaction: the journal beside
    the file is rolled back, as by any SQLite writer, and the run starts afresh. Before,
    the read-only look at the file could not roll it back and the store was refused as
    "read-only (attempt to write a readonly database)", run after run."""
    path = tmp_path / "store.db"
    crashed_in_first_write(path)
    with pytest.raises(ConfigError, match="left unfinished, which only a writer can roll back"):
        async with SQLiteStore(path, read_only=True).opened():
            pass  # a read-only open cannot: it says why, not "read-only"
    report = await runner(path, Log(None), 2).run("b")
    assert report.counts["completed"] == 2
    store = SQLiteStore(path, read_only=True)
    async with store.opened():
        assert [b.benchmark_id for b in await store.benchmarks()] == ["b"]


async def test_a_corrupt_file_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await make_store(path)
    data = bytearray(path.read_bytes())
    data[100:4096] = os.urandom(4096 - 100)  # the schema page, after the header
    path.write_bytes(bytes(data))
    before = digest(path)
    with pytest.raises(ConfigError, match=f"{path}.*corrupt") as info:
        async with SQLiteStore(path).opened():
            pass
    assert "\n" not in str(info.value)
    assert digest(path) == before


@pytest.mark.skipif(sys.platform == "win32", reason="needs /dev/null and mkfifo")
@pytest.mark.parametrize("read_only", [False, True], ids=["writing", "read_only"])
@pytest.mark.parametrize("kind", ["device", "pipe"])
async def test_a_path_that_is_no_regular_file_is_refused(
    tmp_path: Path, kind: str, read_only: bool
) -> None:
    """``--store /dev/null`` is bad input, not a store the OS would not write (SQLite's
    fsync of it fails: "a disk quota may be reached", exit 1); and a named pipe is
    refused, not opened (SQLite's open of it waited for a writer, for ever)."""
    path = Path(os.devnull)
    if kind == "pipe":
        path = tmp_path / "store.db"
        os.mkfifo(path)
    with pytest.raises(ConfigError, match=f"store path '{path}' is not a regular file"):
        async with SQLiteStore(path, read_only=read_only).opened():
            pass


async def test_a_store_of_another_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await make_store(path)
    with closing(sqlite3.connect(path)) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
        db.commit()
    with pytest.raises(ConfigError, match=f"{path}.*schema version 99"):
        async with SQLiteStore(path).opened():
            pass


# -- read-only -----------------------------------------------------------------


async def test_a_read_only_store_reads_everything_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await make_store(path)
    before = digest(path)
    store = SQLiteStore(path, read_only=True)
    async with store.opened():
        assert await store.history(K) == trial()
        assert [s.commits for s in await store.summaries("bench")] == [5]
        assert [len(chunk) async for chunk in store.scan("bench")] == [1]
        assert await store.benchmark_config("bench") == CONFIG
        assert [(b.benchmark_id, b.finished) for b in await store.benchmarks()] == [("bench", 1)]
        with pytest.raises(StoreError, match="read-only"):
            store.enqueue(K, trial(5))
        with pytest.raises(StoreError, match="read-only"):
            await store.register_benchmark("other", CONFIG)
        with pytest.raises(StoreError, match="read-only"):
            async with store.claim("bench"):
                pass
    assert digest(path) == before


async def test_a_read_only_store_that_is_not_there_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "missing.db"
    with pytest.raises(ConfigError, match=f"no store at '{path}'"):
        async with SQLiteStore(path, read_only=True).opened():
            pass
    assert not path.exists()


@pytest.mark.skipif(ROOT, reason="root writes to a chmod 444 file and folder anyway")
@pytest.mark.parametrize("what", ["file", "folder"])
async def test_a_store_the_os_will_not_let_us_write(tmp_path: Path, what: str) -> None:
    path = tmp_path / "ro" / "store.db"
    await make_store(path)
    target = path if what == "file" else path.parent
    mode = target.stat().st_mode
    target.chmod(0o444 if what == "file" else 0o555)
    try:
        with pytest.raises(corral.CorralError, match=f"{path}.*(read-only|cannot)"):
            async with SQLiteStore(path).opened():
                pass
        store = SQLiteStore(path, read_only=True)
        async with store.opened():
            assert await store.history(K) == trial()
    finally:
        target.chmod(mode)


def _as_a_user() -> list[str]:
    """A command prefix under which the folder's mode holds: root runs without the
    rights that pass it (as a user reads a store in a folder it may not write)."""
    if not ROOT:
        return []
    if not Path("/usr/bin/setpriv").exists():
        pytest.skip("root writes to a chmod 555 folder anyway, and there is no setpriv")
    return ["/usr/bin/setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner"]


@pytest.mark.slow  # every reading command, each a process of its own
async def test_a_store_in_a_folder_no_one_may_write_is_read_by_every_reading_command(
    tmp_path: Path,
) -> None:
    """A store written and closed (no -wal, no -shm beside it) in a folder made read-only
    (an archived results folder, a read-only mount): SQLite cannot make the -shm a WAL
    reader needs, and every reading command was refused ('is read-only ...; it can still
    be read (read_only=True)', though it was opened so)."""
    path = tmp_path / "ro" / "store.db"
    await make_store(path)
    assert sorted(p.name for p in path.parent.iterdir()) == ["store.db"]
    before = digest(path)
    path.parent.chmod(0o555)
    try:
        for command in (["list"], ["show", "bench", "task", "0"]):
            done = await anyio.run_process(
                [*_as_a_user(), sys.executable, "-m", "corral", *command, "--store", path],
                check=False,
            )
            assert done.returncode == 0, done.stderr.decode()
            assert b"bench" in done.stdout
    finally:
        path.parent.chmod(0o755)
    assert sorted(p.name for p in path.parent.iterdir()) == ["store.db"]
    assert digest(path) == before


_READER = """
import sys, anyio
from corral import SQLiteStore

async def main():
    store = SQLiteStore(sys.argv[1], read_only=True)
    async with store.opened():
        print(sorted(b.benchmark_id for b in await store.benchmarks()), flush=True)
        sys.stdin.readline()  # a writer opened the store meanwhile
        print(sorted(b.benchmark_id for b in await store.benchmarks()), flush=True)

anyio.run(main)
"""


@pytest.mark.parametrize("writer_left", [False, True], ids=["came later", "came and went"])
async def test_a_store_read_as_it_is_sees_a_writer_that_came_later(
    tmp_path: Path, writer_left: bool
) -> None:
    """A reader that may not write the folder reads the closed store as it is (SQLite's
    immutable); a writer that may (the folder's owner) then starts: the reader (corral
    view, kept open) went on reading the file as unchanging, blind to every commit. Also
    when the writer (a short run) ended before the reader read again: no -wal is left
    beside the file, and the reader read the file as it was when it opened it."""
    path = tmp_path / "ro" / "store.db"
    await make_store(path)
    path.parent.chmod(0o555)
    try:
        async with await anyio.open_process(
            [*_as_a_user(), sys.executable, "-c", _READER, str(path)]
        ) as reader:
            assert reader.stdout is not None and reader.stdin is not None
            lines = BufferedByteReceiveStream(reader.stdout)
            assert await lines.receive_until(b"\n", 1000) == b"['bench']"
            writer = SQLiteStore(path)
            async with writer.opened():
                await writer.register_benchmark("later", CONFIG)
                if not writer_left:
                    await reader.stdin.send(b"go\n")
                    second = await lines.receive_until(b"\n", 1000)
            if writer_left:
                assert not path.with_name("store.db-wal").exists()
                await reader.stdin.send(b"go\n")
                second = await lines.receive_until(b"\n", 1000)
            await reader.wait()
    finally:
        path.parent.chmod(0o755)
    assert second == b"['bench', 'later']"


# -- vanished, full ------------------------------------------------------------


async def test_a_store_deleted_while_open_fails_the_next_append(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    store = SQLiteStore(path)
    # The failed batch ends the store's use too (appends nobody waits for fail with it).
    with pytest.raises(StoreError, match=f"{path}.*deleted or replaced"):
        async with store.opened():
            await store.append(K, trial()[:1])
            path.unlink()  # SQLite would write on to the unlinked file: every commit lost
            with pytest.raises(StoreError, match=f"{path}.*deleted or replaced"):
                await store.append(K, trial()[1:])


class FillsUp(SQLiteStore):
    """The writer may grow the file by a few pages only: a disk that fills up."""

    def _configure_writer(self, writer: sqlite3.Connection) -> None:
        pages = writer.execute("PRAGMA page_count").fetchone()[0]
        writer.execute(f"PRAGMA max_page_count = {pages + 4}")


async def test_a_full_disk_is_one_store_error_naming_the_path(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await make_store(path)
    store = FillsUp(path)
    with pytest.raises(StoreError) as ended:
        async with store.opened():
            with pytest.raises(StoreError) as info:
                for seq in range(5, 200):
                    await store.append(K, [Commit(seq, "action", {"blob": "x" * 4000}, 1.0)])
    message = str(info.value)
    assert str(path) in message and "disk full" in message and "\n" not in message
    assert str(ended.value) == message
    again = SQLiteStore(path)
    async with again.opened():  # what landed before is intact, without a gap
        seqs = [c.seq for c in await again.history(K)]
    assert seqs[:5] == [0, 1, 2, 3, 4] and seqs == list(range(len(seqs)))


async def test_a_run_on_a_full_disk_ends_with_that_error(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    await make_store(path)
    with pytest.raises(BaseException) as info:
        await runner(FillsUp(path), Log(None), 40).run("b", trials_per_task=3)
    # Every trial waiting on the batch hears the same error (the runner may group them).
    found = leaves(info.value)
    assert {str(leaf) for leaf in found} == {str(found[0])}
    assert isinstance(found[0], StoreError) and "disk full" in str(found[0])


class _NoRoom(io.RawIOBase):
    """A file on a full disk: every write is refused (``ENOSPC``)."""

    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        return 0

    def write(self, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


async def test_a_configuration_that_finds_the_disk_full_is_one_store_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Registering makes the configuration's text in a file beside the store first: a
    short one sits in that file's buffer until it is read back, where the full disk
    shows. Still one `StoreError` naming the store (not the OS's error), and nothing
    registered."""
    path = tmp_path / "store.db"
    monkeypatch.setattr(
        corral.store.sqlite, "TemporaryFile", lambda **_: io.BufferedRandom(_NoRoom())
    )
    store = SQLiteStore(path)
    async with store.opened():
        with pytest.raises(StoreError) as info:
            await store.register_benchmark("bench", CONFIG)
        assert str(path) in str(info.value) and "disk full" in str(info.value)
        assert await store.benchmark_config("bench") is None


async def test_a_store_reached_through_a_link_in_a_read_only_folder_registers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store file reached by a symlink whose folder takes no new file (a read-only
    mount): SQLite writes beside the real file, and so does registering, which makes
    its configuration's text in a file beside the store first. (Root ignores a
    folder's modes: the OS's refusal in the link's folder is played.)"""
    real, links = tmp_path / "data", tmp_path / "links"
    real.mkdir()
    links.mkdir()
    await make_store(real / "store.db")
    (links / "store.db").symlink_to(real / "store.db")
    made = corral.store.sqlite.TemporaryFile

    def refused_in_links(**options: Any) -> Any:
        if Path(options["dir"]) == links:
            raise PermissionError(errno.EROFS, "Read-only file system", str(links))
        return made(**options)

    monkeypatch.setattr(corral.store.sqlite, "TemporaryFile", refused_in_links)
    store = SQLiteStore(links / "store.db")
    async with store.opened():
        await store.register_benchmark("other", CONFIG)
        assert await store.benchmark_config("other") == CONFIG


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


# -- finished trials, with reopenings -------------------------------------------


def commits(*kinds: str) -> list[Commit]:
    payload: dict[str, Any] = {"status": "completed", "output": 1, "error": None, "attempts": 1}
    return [Commit(seq, kind, dict(payload), 1.0 + seq) for seq, kind in enumerate(kinds)]


@pytest.mark.parametrize("backend", ["memory", "sqlite"])
async def test_a_reopened_trial_is_unfinished_until_it_ends_again(
    tmp_path: Path, backend: str
) -> None:
    store: CommitStore = MemoryStore() if backend == "memory" else SQLiteStore(tmp_path / "s.db")
    histories = {
        "ended": ("setup", "terminal", "evaluation"),
        "reopened": ("setup", "terminal", "evaluation", "reopen", "setup"),
        "ended again": ("setup", "terminal", "reopen", "setup", "terminal", "evaluation"),
        "running": ("setup", "action"),
    }
    async with store.opened():
        await store.register_benchmark("bench", CONFIG)
        for task_id, kinds in histories.items():
            await store.append(TrialKey("bench", task_id, 0), commits(*kinds))
        [info] = await store.benchmarks()
    assert info.finished == 2  # "ended" and "ended again"


_GROWS_TOO_FAR = """
import resource, signal, sys
from pathlib import Path
import anyio
from corral import Commit, SQLiteStore, StoreError, TrialKey

async def main() -> None:
    path = Path(sys.argv[1])
    size = path.stat().st_size + 64 * 1024
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    store = SQLiteStore(path)
    try:
        async with store.opened():
            for seq in range(5, 200):
                key = TrialKey("bench", "task", 0)
                await store.append(key, [Commit(seq, "action", {"blob": "x" * 4000}, 1.0)])
    except StoreError as exc:
        print(exc)

anyio.run(main)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="needs RLIMIT_FSIZE")
async def test_a_write_the_os_refuses_says_the_store_cannot_be_written(tmp_path: Path) -> None:
    """A file at its size limit (or a user over a disk quota) fails SQLite's write with
    an I/O error, not SQLITE_FULL: it is a write that failed, not a file unreadable."""
    path = tmp_path / "store.db"
    await make_store(path)
    child = await anyio.run_process(
        [sys.executable, "-c", _GROWS_TOO_FAR, str(path)],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    message = child.stdout.decode().strip()
    assert message.startswith(f"store {str(path)!r} cannot be written"), message
    again = SQLiteStore(path)
    async with again.opened():  # what landed before is intact, without a gap
        seqs = [c.seq for c in await again.history(K)]
    assert seqs[:5] == [0, 1, 2, 3, 4] and seqs == list(range(len(seqs)))


@pytest.mark.parametrize(
    "exc",
    [
        sqlite3.OperationalError("database or disk is full"),
        OSError(errno.ENOSPC, "No space left on device"),
    ],
)
def test_a_full_disk_reads_as_such_whichever_layer_saw_it(exc: BaseException) -> None:
    error = store_error(Path("/data/store.db"), exc)
    assert isinstance(error, StoreError)
    assert str(error).startswith("store '/data/store.db' cannot be written: disk full")
    assert isinstance(open_error(Path("/data/store.db"), exc), StoreError)  # not bad input


@pytest.mark.anyio
async def test_concurrent_runs_on_one_sqlite_store_survive_the_first_finishing(
    tmp_path: Path,
) -> None:
    gates = {"first": Gate(), "second": Gate()}
    started = {"first": anyio.Event(), "second": anyio.Event()}
    first_done = anyio.Event()

    async def decide(session: corral.AgentSession) -> Final:
        started[session.benchmark_id].set()
        await gates[session.benchmark_id].wait()
        return Final(1)

    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=tmp_path / "store.db",
        retry_policy=RetryPolicy(max_retries=0),
    )
    reports: dict[str, corral.BenchmarkReport] = {}

    async def go(benchmark_id: str) -> None:
        reports[benchmark_id] = await runner.run(benchmark_id)
        if benchmark_id == "first":
            first_done.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(go, "first")  # opens the store
            await started["first"].wait()
            tg.start_soon(go, "second")  # shares it
            await started["second"].wait()
            gates["first"].open()
            await first_done.wait()  # the opener is done and has left opened()
            gates["second"].open()
    assert reports["second"].tasks["t"].trials[0].status == "completed"


@pytest.mark.anyio
async def test_rerun_with_tuple_inputs_resumes_on_sqlite(tmp_path: Path) -> None:
    tasks = {"t": BenchmarkTaskMetadata("a", "e", inputs={"xs": (1, 2)})}

    def make() -> CorralRunner:
        return CorralRunner(
            tasks,
            {"a": ScriptedAgent()},
            {"e": FakeEnvironment()},
            store=tmp_path / "store.db",
            retry_policy=RetryPolicy(max_retries=0),
        )

    first = await make().run("b")
    second = await make().run("b")  # same tasks, same metadata: must resume
    assert second.resumed == 1
    assert second.pass_at_k == first.pass_at_k


@pytest.mark.parametrize("count", [0, 1, 7, 64, 100, 200])
def test_rows_inserted_a_few_statements_a_batch_are_as_one_a_row(count: int) -> None:
    """`insert_rows` writes a batch's rows through statements of many rows (64, 32 ... 1),
    binding the benchmark id once a statement: what lands, in which order, is what a
    statement a row (``executemany``) writes."""
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE TABLE one (b, a, n, x)")
        conn.execute("CREATE TABLE many (b, a, n, x)")
        rows = [(f"t{i}", i, i / 3 if i % 5 else math.nan) for i in range(count)]
        conn.executemany("INSERT INTO one VALUES (?, ?, ?, ?)", [("b", *row) for row in rows])
        statements = sqlite_store._statements("INSERT INTO many (b, a, n, x)", 3, 64)
        sqlite_store.insert_rows(conn, statements, "b", rows)
        read = "SELECT rowid, b, a, n, x, typeof(x) FROM {} ORDER BY rowid"
        assert (
            conn.execute(read.format("many")).fetchall()
            == conn.execute(read.format("one")).fetchall()
        )
