"""The viewer shows the numbers the store's report gives (finished
trials, the reflective chain of a rerun trial) and reads no configuration whole on
each poll of its benchmarks page; `corral copy` prints recorded ids escaped; an export
never writes over the store it reads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from bench.viewer_stores import serving
from click.testing import CliRunner

from corral import Commit, SQLiteStore, TrialKey
from corral import history as H
from corral._types import TrialStatus
from corral.cli import main
from corral.cli._view import listening_socket

AT = 1.8e9
CONFIG = {
    "trials_per_task": 2,
    "tasks": {
        "t": {
            "agent_id": "agent",
            "environment_id": "env",
            "model": "m",
            "max_iterations": 10,
            "dependencies": [],
            "inputs": {},
        }
    },
}


def _setup(seq: int, at: float, previous: int | None = None) -> Commit:
    return Commit(seq, "setup", H.encode(H.SetupPayload(state={}, previous_trial=previous)), at)


def _terminal(seq: int, at: float, status: str) -> Commit:
    failure = {"error": "ValueError: boom"} if status == "error" else None
    payload = H.terminal(TrialStatus(status), attempts=1, failure=failure, output="o")
    return Commit(seq, "terminal", H.encode(payload), at)


def _evaluation(seq: int, at: float, passed: bool) -> Commit:
    payload = H.EvaluationPayload(score=float(passed), passed=passed, details={})
    return Commit(seq, "evaluation", H.encode(payload), at)


def _reopen(seq: int, at: float, previous_status: str) -> Commit:
    return Commit(seq, "reopen", H.encode(H.reopen(TrialStatus(previous_status))), at)


def _write(path: Path, benchmark_id: str, trials: dict[int, list[Commit]]) -> None:
    async def go() -> None:
        store = SQLiteStore(path)
        async with store.opened():
            await store.register_benchmark(benchmark_id, CONFIG)
            for trial, commits in trials.items():
                await store.enqueue(TrialKey(benchmark_id, "t", trial), commits).wait()

    anyio.run(go)


def _api(client: httpx.Client, name: str, **params: Any) -> Any:
    response = client.get(f"/api/{name}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_benchmarks_page_counts_finished_trials_as_the_report_does(tmp_path: Path) -> None:
    """A trial that ended but is not scored yet (the run stopped during scoring) is not
    finished for `corral report`, `corral list` or the benchmark's own page: the list of
    benchmarks must not count it either ("2 / 2 done" beside "1 of 2 finished")."""
    path = tmp_path / "store.db"
    _write(
        path,
        "scoring",
        {
            0: [_setup(0, AT), _terminal(1, AT + 1, "completed"), _evaluation(2, AT + 2, True)],
            1: [_setup(0, AT), _terminal(1, AT + 1, "completed")],  # not scored yet
        },
    )
    listed = CliRunner().invoke(main, ["list", "--store", str(path)], catch_exceptions=False)
    assert "1/2" in listed.output
    with serving(path) as url, httpx.Client(base_url=url, timeout=30) as client:
        summary = _api(client, "benchmark", id="scoring", wait="1")
        assert summary["counts"]["unfinished"] == 1  # the report: 1 of 2 finished
        (entry,) = _api(client, "benchmarks")["benchmarks"]
        assert (entry["finished"], entry["total"]) == (1, 2)


def test_a_rerun_trial_shows_the_trial_its_latest_attempt_saw(tmp_path: Path) -> None:
    """A trial rerun (``--rerun error``) starts over from a new setup, which records the
    earlier trial this attempt was shown; the report uses this attempt, so the task's
    reflective chain and the trial page must name that trial, not the first attempt's."""
    path = tmp_path / "store.db"
    _write(
        path,
        "rerun",
        {
            0: [_setup(0, AT), _terminal(1, AT + 1, "completed"), _evaluation(2, AT + 2, True)],
            1: [
                _setup(0, AT, previous=None),  # ran beside trial 0: saw none
                _terminal(1, AT + 1, "error"),
                _reopen(2, AT + 10, "error"),
                _setup(3, AT + 11, previous=0),  # the rerun saw trial 0's evaluation
                _terminal(4, AT + 12, "completed"),
                _evaluation(5, AT + 13, False),
            ],
        },
    )
    with serving(path) as url, httpx.Client(base_url=url, timeout=30) as client:
        task = _api(client, "task", id="rerun", task="t")
        assert [x["previous"] for x in task["trials"]] == [None, 0]
        trial = _api(client, "trial", id="rerun", task="t", trial=1)
        assert trial["previous_trial"] == 0


class _CountingStore(SQLiteStore):
    """An SQLite store that counts reads of every benchmark's whole configuration."""

    whole_reads = 0

    async def benchmarks(self) -> Any:
        type(self).whole_reads += 1
        return await super().benchmarks()


@contextmanager
def _served_in_process(store: SQLiteStore) -> Iterator[str]:
    import uvicorn

    from corral.view import create_app

    sock = listening_socket("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(create_app(store), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]})
    thread.start()
    try:  # the socket listens already: a request waits in its backlog until served
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        thread.join()
        sock.close()


def test_polling_the_benchmarks_page_reads_no_configuration_whole(tmp_path: Path) -> None:
    """The benchmarks page asks for /api/benchmarks every 2-3 s. Each answer decoded every
    benchmark's whole configuration on the event loop: with one 100,000-task benchmark
    that is over a second of every three during which the viewer answers nothing.
    The list needs each benchmark's counts, which the store keeps without it
    (`overview`, `finished_trials`; what `corral list` reads)."""
    path = tmp_path / "store.db"
    _write(path, "b", {0: [_setup(0, AT), _terminal(1, AT + 1, "completed")]})
    store = _CountingStore(path, read_only=True)
    with _served_in_process(store) as url, httpx.Client(base_url=url, timeout=30) as client:
        _api(client, "benchmark", id="b", wait="1")  # loaded once
        before = _CountingStore.whole_reads
        for _ in range(3):
            (entry,) = _api(client, "benchmarks")["benchmarks"]
            assert entry["benchmark_id"] == "b" and entry["total"] == 2
        assert _CountingStore.whole_reads == before


def test_copy_prints_a_recorded_benchmark_id_escaped(tmp_path: Path) -> None:
    """A store handed over (a colleague's run) may hold any benchmark id: `corral copy`
    printed it raw, so its escape sequences wrote the clipboard and cleared the screen
    of whoever copied it (`corral list` shows the same id escaped)."""
    source, destination = tmp_path / "source.db", tmp_path / "destination.db"
    evil = "x\x1b]52;c;cHduZWQ=\x07\x1b[2Jy"

    async def go() -> None:
        store = SQLiteStore(source)
        async with store.opened():
            await store.register_benchmark(evil, CONFIG)

    anyio.run(go)
    listed = CliRunner().invoke(main, ["list", "--store", str(source)], catch_exceptions=False)
    assert "\x1b" not in listed.output  # as list shows it
    copied = CliRunner().invoke(
        main, ["copy", str(source), str(destination)], catch_exceptions=False
    )
    assert copied.exit_code == 0, copied.output
    assert "\x1b" not in copied.output and "\x07" not in copied.output, repr(copied.output)
    assert "\\x1b]52;c;cHduZWQ=\\x07" in copied.output


@pytest.fixture(autouse=True)
def _reset_counts() -> None:
    _CountingStore.whole_reads = 0


def test_an_export_never_writes_over_the_store_it_reads(tmp_path: Path) -> None:
    """``corral view --export ID -o FILE``: a slip of the keyboard (``-o store.db``) wrote
    the page over the store, and every trial was gone. Reading
    a benchmark never changes the store: the export is refused as bad input."""
    path = tmp_path / "store.db"
    _write(path, "b", {0: [_setup(0, AT), _terminal(1, AT + 1, "completed")]})
    before = path.read_bytes()
    args = ["view", "--store", str(path), "--export", "b", "-o", str(path)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output  # bad input
    assert path.read_bytes() == before
    listed = CliRunner().invoke(main, ["list", "--store", str(path)], catch_exceptions=False)
    assert listed.exit_code == 0 and "0/2" in listed.output  # the store, as it was
