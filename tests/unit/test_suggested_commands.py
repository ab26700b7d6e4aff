"""What the CLI prints about a benchmark id, and the commands it suggests,
work for every valid id and store (they can be copied and run as printed)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli import main

from .test_cli_wording import BENCH


def _demo(tmp_path: Path, benchmark_id: str):
    return CliRunner().invoke(
        main,
        [
            "demo",
            "--fast",
            "--progress",
            "none",
            "--benchmark-id",
            benchmark_id,
            "--store",
            str(tmp_path / "demo store.db"),
        ],
    )


@pytest.mark.slow  # runs the whole demo
def test_demo_prints_a_benchmark_id_with_brackets_as_written(tmp_path: Path) -> None:
    # A valid id (README: non-empty, <= 200 characters, no control characters).
    result = _demo(tmp_path, "x[/]y")
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert result.exit_code == 0
    assert "benchmark id x[/]y" in result.output


@pytest.mark.slow  # runs the whole demo
def test_demo_does_not_treat_a_benchmark_id_as_markup(tmp_path: Path) -> None:
    result = _demo(tmp_path, "my [red]demo")
    assert result.exit_code == 0
    assert "benchmark id my [red]demo" in result.output


@pytest.mark.slow  # runs the whole demo
def test_demos_next_commands_parse_back_to_its_id_and_store(tmp_path: Path) -> None:
    benchmark_id = "my demo"
    result = _demo(tmp_path, benchmark_id)
    assert result.exit_code == 0
    line = " ".join(result.output.split("next: ", 1)[1].split())
    for command in line.split("  ·  ") if "  ·  " in line else line.split(" · "):
        argv = shlex.split(command)
        if argv[1] in ("show", "report"):
            assert argv[2] == benchmark_id, command
        assert argv[argv.index("--store") + 1] == str(tmp_path / "demo store.db"), command


def test_the_errors_tables_show_command_runs_as_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = tmp_path / "mathbench.py"
    bench.write_text(BENCH)
    store = tmp_path / "s.db"
    monkeypatch.chdir(tmp_path)  # no store at the default path here
    runner = CliRunner()
    ran = runner.invoke(main, ["run", str(bench), "--store", str(store)])
    assert ran.exit_code == 1  # task "bad" errors
    flat = " ".join(ran.output.split())
    shown = flat.split("a trial's history and traceback: ", 1)[1].split(" trials ")[0]
    argv = shlex.split(shown)
    assert argv[:2] == ["corral", "show"]
    again = runner.invoke(main, argv[1:])
    assert again.exit_code == 0, (shown, again.output)
