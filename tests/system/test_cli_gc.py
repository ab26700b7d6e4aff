"""`corral run` tunes the garbage collector of its own process (`corral._gc`), and only
of its own: called from a caller's Python (a test's CliRunner), it leaves the caller's
collector alone."""

from __future__ import annotations

import gc
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral._gc import THRESHOLD
from corral.cli import main

# The agent reports the collector's first threshold as the trial runs.
BENCH = """
import gc, sys
import corral
from corral import BenchmarkTaskMetadata as Meta, Evaluation, Final


class Agent:
    async def act(self, session):
        print("THRESHOLD", gc.get_threshold()[0], file=sys.stderr, flush=True)
        return Final(1)


class Env:
    async def setup(self, session):
        return {}

    async def execute(self, action, session):
        raise AssertionError("no tool")

    async def evaluate(self, trial):
        return Evaluation(1.0, True)


benchmark = corral.Benchmark(
    tasks={"t": Meta("agent", "env")}, agents={"agent": Agent()}, environments={"env": Env()}
)
"""


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    path = tmp_path / "gc_bench.py"
    path.write_text(BENCH)
    return path


def test_the_corral_process_collects_less(bench: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "corral", "run", str(bench), "--store", str(bench.parent / "s.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"THRESHOLD {THRESHOLD}" in done.stderr


def test_a_caller_s_collector_is_left_alone(bench: Path) -> None:
    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    result = CliRunner().invoke(
        main, ["run", str(bench), "--store", str(bench.parent / "s.db")], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    assert f"THRESHOLD {before[0]}" in result.stderr
    assert (gc.get_threshold(), gc.get_freeze_count()) == (before, frozen)
