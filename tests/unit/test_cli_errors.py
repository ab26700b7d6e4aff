"""The CLI's exit codes (0 clean, 1 errors or unfinished, 2 bad input, 130 interrupted)
and its one ``error:`` line for every failure it can name, never a traceback."""

from __future__ import annotations

import dataclasses
import errno
import sqlite3
import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

import corral
from corral.cli import main
from corral.cli._execute import exit_code
from corral.testing import FakeEnvironment, ScriptedAgent

BENCH = textwrap.dedent(
    """
    import corral
    from corral import BenchmarkTaskMetadata as Meta

    class Agent:
        async def act(self, session):
            if session.task_id == "{BROKEN_TASK}":
                raise ValueError("the agent is broken")
            return corral.Final(session.task_id)

    class Env:
        async def setup(self, session):
            return {}

        async def execute(self, action, session):
            return corral.ToolEffect(None)

        async def evaluate(self, trial):
            if trial.output == "{BROKEN_SCORER}":
                raise KeyError("the scorer is broken")
            return corral.Evaluation(1.0, True)

    benchmark = corral.Benchmark(
        {"t0": Meta("a", "e"), "t1": Meta("a", "e")},
        {"a": Agent()},
        {"e": Env()},
        run_defaults={"max_retries": 0, "backoff_base": 0.0},
    )
    """
)


def _bench(tmp_path: Path, broken_task: str = "-", broken_scorer: str = "-") -> Path:
    path = tmp_path / "bench.py"
    path.write_text(
        BENCH.replace("{BROKEN_TASK}", broken_task).replace("{BROKEN_SCORER}", broken_scorer)
    )
    return path


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _one_error_line(result: Result, code: int) -> str:
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def _run(tmp_path: Path, bench: Path, *args: Any) -> Result:
    return _invoke("run", bench, "--store", tmp_path / "store.db", "--no-progress", *args)


# -- exit codes ---------------------------------------------------------------


def test_a_clean_run_exits_0(tmp_path: Path) -> None:
    assert _run(tmp_path, _bench(tmp_path)).exit_code == 0


def test_a_trial_that_ended_with_an_error_exits_1(tmp_path: Path) -> None:
    result = _run(tmp_path, _bench(tmp_path, broken_task="t1"))
    assert result.exit_code == 1, result.output
    assert "error 1" in result.output  # the report is still printed


def test_a_scorer_that_failed_exits_1(tmp_path: Path) -> None:
    result = _run(tmp_path, _bench(tmp_path, broken_scorer="t0"), "--json")
    assert result.exit_code == 1, result.output


def test_an_unfinished_report_exits_1(tmp_path: Path) -> None:
    """A run stopped early (fail_on_error) returns a report with fewer trials."""
    runner = corral.CorralRunner(
        {"t": corral.BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(lambda s: corral.Final(1))},
        {"e": FakeEnvironment()},
        store=corral.MemoryStore(),
    )
    report = anyio.run(lambda: runner.run("b", trials_per_task=2))
    assert exit_code(report) == 0
    task = report.tasks["t"]
    cut = dataclasses.replace(
        report, tasks={"t": dataclasses.replace(task, trials=task.trials[:1])}
    )
    assert exit_code(cut) == 1


def test_the_exit_codes_are_documented() -> None:
    for args in ([], ["run"], ["rescore"]):
        out = _invoke(*args, "--help").output
        assert "Exit codes" in out and "130" in out, args
    assert "still exits 0 once it has run" in " ".join(_invoke("demo", "--help").output.split())


# -- one error line -----------------------------------------------------------


def test_a_full_disk_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(*args: Any) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", "reports/bench.json")

    monkeypatch.setattr("corral._runner.write_report", full)
    line = _one_error_line(_run(tmp_path, _bench(tmp_path)), 1)
    report = tmp_path / "reports" / "bench.json"
    assert f"report file {str(report)!r} could not be written (No space left on device)" in line


def test_an_untranslated_sqlite_error_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def full(*args: Any, **kwargs: Any) -> None:
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(corral.CorralRunner, "run", full)
    line = _one_error_line(_run(tmp_path, _bench(tmp_path)), 1)
    assert "database or disk is full" in line


def test_a_group_of_errors_names_each_distinct_one_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    leaves: list[Exception] = []

    async def failing(*args: Any, **kwargs: Any) -> None:
        raise ExceptionGroup("run", [ExceptionGroup("inner", leaves[:1]), *leaves[1:]])

    monkeypatch.setattr(corral.CorralRunner, "run", failing)
    bench = _bench(tmp_path)
    leaves[:] = [
        corral.StoreError("database or disk is full"),
        corral.StoreError("database or disk is full"),
        PermissionError(errno.EACCES, "Permission denied", "/x/store.db"),
    ]
    line = _one_error_line(_run(tmp_path, bench), 1)
    assert line.count("database or disk is full") == 1
    assert "Permission denied: '/x/store.db'" in line

    leaves[:] = [corral.ConfigError(f"bad {i}") for i in range(5)]
    line = _one_error_line(_run(tmp_path, bench), 2)  # only bad input: exit 2
    assert "bad 0" in line and "bad 2" in line and "bad 3" not in line
    assert "and 2 more" in line


def test_an_unknown_bug_keeps_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def bug(*args: Any, **kwargs: Any) -> None:
        raise ExceptionGroup("run", [RuntimeError("a bug"), corral.StoreError("x")])

    monkeypatch.setattr(corral.CorralRunner, "run", bug)
    with pytest.raises(ExceptionGroup):
        _run(tmp_path, _bench(tmp_path))


# -- the user's benchmark file --------------------------------------------------


@pytest.mark.parametrize(
    ("source", "target", "named"),
    [
        ("x = (\n", "bench.py", "SyntaxError"),
        ("import helper\n", "bench.py", "RuntimeError: boom in helper"),
        ("def make():\n    return 1 / 0\n", "bench.py:make", "ZeroDivisionError"),
        ("import corral\ncorral.Limits.resolve(max_parallel=0)\n", "bench.py", "max_parallel"),
    ],
)
def test_errors_in_the_benchmark_file_show_only_the_users_frames(
    tmp_path: Path, source: str, target: str, named: str
) -> None:
    (tmp_path / "bench.py").write_text(source)
    (tmp_path / "helper.py").write_text("def f():\n    raise RuntimeError('boom in helper')\nf()\n")
    result = _invoke("run", tmp_path / target, "--store", tmp_path / "store.db")
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and named in lines[-1]
    assert sum(line.startswith("error: ") for line in lines) == 1
    assert "bench.py" in result.stderr
    for internal in ("click", "/corral/", "importlib"):
        assert internal not in result.stderr.replace(lines[-1], ""), result.stderr
    assert not (tmp_path / "store.db").exists()


# -- arguments ----------------------------------------------------------------


def test_corral_alone_prints_its_help_as_help_not_as_an_error_line() -> None:
    """`corral` with no command is a newcomer asking what there is: the help, laid out
    as `corral --help` lays it out (not squeezed into one `error: Usage: ...` line)."""
    result = _invoke()
    assert result.exit_code == 2, result.output
    help_text = _invoke("--help").stdout
    assert result.stderr == help_text, result.stderr
    assert "error:" not in result.stderr


def test_invalid_utf8_in_an_argument_is_one_line(tmp_path: Path) -> None:
    # Python turns undecodable bytes of argv into lone surrogates.
    line = _one_error_line(_invoke("run", "\udcff.py"), 2)
    assert "b'\\xff.py'" in line and "UTF-8" in line
    bench = _bench(tmp_path)
    line = _one_error_line(_run(tmp_path, bench, "--benchmark-id", "\udcff"), 2)
    assert "b'\\xff'" in line and "--benchmark-id" in line
    assert not (tmp_path / "store.db").exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [(["--benchmark-id", ""], "benchmark_id"), (["--model", ""], "--model")],
)
def test_empty_ids_and_models_are_refused(tmp_path: Path, args: list[str], named: str) -> None:
    line = _one_error_line(_run(tmp_path, _bench(tmp_path), *args), 2)
    assert named in line
    assert not (tmp_path / "store.db").exists()


def test_run_defaults_that_are_not_a_mapping_are_refused(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text("import corral\nbenchmark = corral.Benchmark({}, {}, {}, run_defaults=3)\n")
    line = _one_error_line(_invoke("run", bench, "--store", tmp_path / "store.db"), 2)
    assert "run_defaults" in line and "3" in line


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (('{"a": Agent()}', '{"a": Agent}'), "agent 'a' is the class Agent: pass an instance"),
        (("return corral.Final", "yield corral.Final"), "agent 'a''s act is a generator"),
        (('{"e": Env()}', '{"e": Env}'), "environment 'e' is the class Env: pass an instance"),
        (("return {}", "yield {}"), "environment 'e''s setup is a generator"),
    ],
)
def test_an_agent_or_environment_that_cannot_run_is_refused_before_the_store_is_made(
    tmp_path: Path, change: tuple[str, str], named: str
) -> None:
    """A class for its instance, or a generator for an ``async def``, failed every
    attempt of every trial with a TypeError; `corral run` refuses the file, naming it."""
    bench = _bench(tmp_path)
    bench.write_text(bench.read_text().replace(*change))
    line = _one_error_line(_run(tmp_path, bench), 2)
    assert named in line
    assert not (tmp_path / "store.db").exists()
