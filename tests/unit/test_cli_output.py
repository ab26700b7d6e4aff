"""The CLI's output as a pipe and as files see it: a closed pipe is no failure, type
names read as English, and a report file keeps its benchmark id readable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from corral.report._files import report_file_name

from .test_cli_wording import BENCH, cli, ran

SRC = Path(__file__).resolve().parents[2] / "src"


def closed_stdout(*args: object) -> subprocess.CompletedProcess[str]:
    """Run ``corral ARGS`` with stdout a pipe whose reader is gone before anything is
    written (what ``| head`` does once it has its lines)."""
    read, write = os.pipe()
    os.close(read)  # no reader: the first write fails with EPIPE, deterministically
    try:
        return subprocess.run(
            [sys.executable, "-m", "corral", *map(str, args)],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(SRC)},
            timeout=120,
            check=False,
        )
    finally:
        os.close(write)


@pytest.mark.slow  # starts a process: a system test
def test_a_closed_pipe_is_not_a_failure(tmp_path: Path) -> None:
    bench = tmp_path / "clean.py"
    bench.write_text(BENCH.replace('("ok", "bad")', '("ok",)'))
    store = tmp_path / "s.db"
    for args in (("run", bench), ("report", "clean")):
        done = closed_stdout(*args, "--store", store)
        assert (done.returncode, done.stderr) == (0, ""), args


@pytest.mark.slow  # starts a process: a system test
def test_a_closed_pipe_keeps_a_failed_runs_exit_code(tmp_path: Path) -> None:
    bench = tmp_path / "mathbench.py"
    bench.write_text(BENCH)
    done = closed_stdout("run", bench, "--store", tmp_path / "s.db")
    assert (done.returncode, done.stderr) == (1, "")  # its trials errored


@pytest.mark.parametrize(
    ("source", "said"),
    [
        ("benchmark = 42\n", "broken_type.py:benchmark is of type int, not a corral.Benchmark"),
        (  # a function that forgot its return
            "def benchmark():\n    pass\n",
            "broken_type.py:benchmark() returned None, not a corral.Benchmark",
        ),
    ],
)
def test_a_wrong_object_type_reads_as_english(tmp_path: Path, source: str, said: str) -> None:
    bench = tmp_path / "broken_type.py"
    bench.write_text(source)
    result = cli("run", bench, "--store", tmp_path / "s.db")
    assert result.exit_code == 2
    assert said in result.stderr


def test_a_mixed_case_id_keeps_its_case_in_the_report_file_name(tmp_path: Path) -> None:
    name = report_file_name("demo-20261201T202831Z")
    assert name.startswith("demo-20261201T202831Z~") and name.endswith(".json")
    _, store = ran(tmp_path)
    assert (store.parent / "reports" / "mathbench.json").is_file()  # plain ids: as they are


@pytest.mark.slow  # starts a process: a system test
def test_json_and_help_to_a_closed_pipe_are_not_a_failure(tmp_path: Path) -> None:
    """click's own echo (not rich's console) meets the closed pipe here."""
    bench = tmp_path / "clean.py"
    bench.write_text(BENCH.replace('("ok", "bad")', '("ok",)'))
    store = tmp_path / "s.db"
    for benchmark_id in ("one", "two"):
        assert cli("run", bench, "--store", store, "--benchmark-id", benchmark_id).exit_code == 0
    for args in (
        ("report", "one", "--json", "--store", store),
        ("show", "one", "ok", "0", "--json", "--store", store),
        ("compare", "one", "two", "--json", "--store", store),
        ("--help",),
    ):
        done = closed_stdout(*args)
        assert (done.returncode, done.stderr) == (0, ""), args
