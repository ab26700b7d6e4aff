"""The command line: demo, run (flags, defaults, resume), report, show, list, and
one clear ``error:`` line with exit code 2 for every bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from corral.cli import main

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"

BENCH = textwrap.dedent(
    """
    import corral

    CALLS = []

    class Agent:
        async def act(self, session):
            CALLS.append((session.task_id, session.trial))
            if not session.steps:
                return corral.Action("echo", {"value": session.trial})
            return corral.Final(session.inputs.get("parent", session.trial))

    class Env:
        async def setup(self, session):
            return {"n": 0}

        async def execute(self, action, session):
            return corral.ToolEffect(action.arguments["value"], {"n": session.state["n"] + 1})

        async def evaluate(self, trial):
            return corral.Evaluation(1.0, trial.output % 2 == 0)

    tasks = {
        "parent": corral.BenchmarkTaskMetadata("a", "e", model="m1"),
        "child": corral.BenchmarkTaskMetadata("a", "e", model="m2", dependencies=("parent",)),
        "solo": corral.BenchmarkTaskMetadata("a", "e", model="m1", inputs={"prompt": "hi"}),
    }

    def make():
        return corral.Benchmark(tasks, {"a": Agent()}, {"e": Env()},
                                run_defaults={RUN_DEFAULTS})

    benchmark = make()
    not_a_benchmark = 42
    """
)


def _bench(tmp_path: Path, run_defaults: str = '"trials_per_task": 4, "k_values": (1, 2)') -> Path:
    path = tmp_path / "bench.py"
    path.write_text(BENCH.replace("{RUN_DEFAULTS}", "{" + run_defaults + "}"))
    return path


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _ok(*args: Any) -> Result:
    result = _invoke(*args)
    assert result.exit_code == 0, result.output
    return result


def _refused(*args: Any) -> str:
    result = _invoke(*args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store.db"


def _demo(*args: Any) -> str:
    result = _invoke("demo", "--fast", "--no-progress", *args)
    # The demo's model server refuses a few requests on purpose; it still exits 0.
    assert result.exit_code == 0, result.output
    assert "error 5" in result.output and "flagged" in result.output
    return result.output


@pytest.mark.slow  # the whole demo (84 trials): a system test
def test_demo_runs_and_prints_the_pass_at_k_table(store: Path) -> None:
    out = _demo("--store", store, "--benchmark-id", "d")
    for column in ("pass@1", "pass@2", "pass@4"):
        assert column in out
    assert "mean of 21 tasks" in out and "bid-verify" in out and "sim-large" in out
    assert "trials" in out and "completed" in out and "tokens" in out
    assert str(store.parent / "reports" / "d.json") in out
    listed = _ok("list", "--store", store).output
    assert "d" in listed and "84/84" in listed


@pytest.mark.slow
def test_demo_defaults_to_a_fresh_timestamped_id(store: Path) -> None:
    out = _demo("--store", store)
    assert "benchmark id demo-" in out


def test_run_quickstart_with_every_flag(store: Path) -> None:
    out = _ok(
        "run",
        QUICKSTART,
        "--store",
        store,
        "--benchmark-id",
        "qs",
        "--trials",
        "2",
        "-k",
        "1,2",
        "--max-parallel",
        "3",
        "--max-parallel-per-task",
        "2",
        "--max-parallel-evaluations",
        "2",
        "--max-parallel-total",
        "4",
        "--max-parallel-by-model",
        "toy=2",
        "--max-parallel-by-environment",
        "calculator=2",
        "--max-parallel-evaluations-by-environment",
        "calculator=1",
        "--order",
        "fifo",
        "--max-retries",
        "1",
        "--trial-timeout",
        "30",
        "--no-progress",
    ).output
    assert "qs: pass@k over 2 trials per task" in out
    assert "pass@2" in out and "pass@4" not in out
    assert "double-it" in out


def test_run_uses_run_defaults_and_the_file_stem(tmp_path: Path, store: Path) -> None:
    out = _ok("run", _bench(tmp_path), "--store", store, "--no-progress").output
    assert "bench: pass@k over 4 trials per task" in out
    assert "pass@2" in out and "pass@4" not in out
    # Outputs 0, 1, 2, 3: half pass; the child passes its parent's output on.
    assert "mean of 3 tasks" in out and "0.50" in out


def test_run_object_may_be_a_function_and_json_is_plain(tmp_path: Path, store: Path) -> None:
    out = _ok("run", f"{_bench(tmp_path)}:make", "--store", store, "--json").output
    report = json.loads(out)
    assert report["benchmark_id"] == "bench"
    assert report["pass_at_k"] == {"1": 0.5, "2": pytest.approx(5 / 6)}
    assert report["tasks"]["child"]["trials"][1]["output"] == 1


def test_run_twice_resumes_instantly_with_the_same_pass_at_k(tmp_path: Path, store: Path) -> None:
    bench = _bench(tmp_path)
    first = json.loads(_ok("run", bench, "--store", store, "--json").output)
    again = json.loads(_ok("run", bench, "--store", store, "--json", "-k", "1").stdout)
    assert again["resumed"] == 12  # every trial reused, none run again
    assert again["pass_at_k"]["1"] == first["pass_at_k"]["1"]
    assert again["counts"] == first["counts"]


def test_task_selection_adds_and_marks_ancestors(tmp_path: Path, store: Path) -> None:
    out = _ok("run", _bench(tmp_path), "--store", store, "--task", "child", "--no-progress").output
    assert "parent *" in out and "added by dependency closure" in out
    assert "solo" not in out


def test_keyed_limits_merge_with_run_defaults(tmp_path: Path, store: Path) -> None:
    bench = _bench(tmp_path, '"max_parallel_by_model": {"m1": 1, "m2": 1}')
    # m2=0 is refused by name, which shows the flag reached the run; m1 came from defaults.
    line = _refused("run", bench, "--store", store, "--max-parallel-by-model", "m2=0")
    assert "max_parallel_by_model['m2']" in line and "0" in line


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--max-parallel-by-model", "m1"], "'m1'"),
        (["--max-parallel-by-environment", "e=lots"], "'lots'"),
        (["--max-parallel-evaluations-by-environment", "=3"], "'=3'"),
        (["--max-parallel", "0"], "max_parallel"),
        (["--max-parallel-total", "-1"], "-1"),
        (["--trials", "zero"], "'zero'"),
        (["-k", "1,x"], "'x'"),
        (["-k", "9"], "k = 9"),
        (["--task", "nope"], "'nope'"),
        (["--task", "child", "--no-dependencies"], "'parent'"),
        (["--trial-timeout", "-1"], "-1"),
        (["--max-retries", "-2"], "-2"),
        (["--order", "lifo"], "'lifo'"),
        (["--max-subprocesses", "0"], "0"),
        (["--model", "a,a"], "'a' is listed twice"),
        (  # before, the last one silently won
            ["--max-parallel-by-model", "m1=2", "--max-parallel-by-model", "m1=5"],
            "'m1' is given twice: 2 and 5",
        ),
        (["--backoff-base", "-1"], "-1"),
    ],
)
def test_bad_run_flags_exit_2_naming_the_value(
    tmp_path: Path, store: Path, args: list[str], named: str
) -> None:
    line = _refused("run", _bench(tmp_path), "--store", store, *args)
    assert named in line
    assert not store.exists()  # refused before anything was written


def test_bad_benchmark_files_exit_2(tmp_path: Path, store: Path) -> None:
    bench = _bench(tmp_path)
    assert "missing.py" in _refused("run", tmp_path / "missing.py", "--store", store)
    assert "'absent'" in _refused("run", f"{bench}:absent", "--store", store)
    assert "int" in _refused("run", f"{bench}:not_a_benchmark", "--store", store)
    odd = _bench(tmp_path, '"bogus": 1')
    assert "'bogus'" in _refused("run", odd, "--store", store)


def test_a_mistyped_run_defaults_key_comes_with_its_close_match(
    tmp_path: Path, store: Path
) -> None:
    """`run(trails_per_task=2)` is refused with "did you mean 'trials_per_task'?"; the
    same typo in a benchmark's ``run_defaults`` was refused with no match named."""
    line = _refused("run", _bench(tmp_path, '"trails_per_task": 2'), "--store", store)
    assert "'trails_per_task'" in line and "; did you mean 'trials_per_task'" in line
    line = _refused("run", _bench(tmp_path, '"tag": ["x"]'), "--store", store)
    assert line.endswith("did you mean 'tags'?")
    assert not store.exists()


def test_a_mistyped_object_name_comes_with_its_close_match(tmp_path: Path, store: Path) -> None:
    """``corral run FILE:OBJECT`` with a typo in OBJECT said only that FILE defines no
    such object, where every other mistyped name comes with its close matches."""
    line = _refused("run", f"{_bench(tmp_path)}:benchmrk", "--store", store)
    assert "'benchmrk'" in line and "; did you mean 'benchmark'" in line
    assert not store.exists()


def test_a_changed_configuration_is_refused(tmp_path: Path, store: Path) -> None:
    bench = _bench(tmp_path)
    _ok("run", bench, "--store", store, "--no-progress")
    line = _refused("run", bench, "--store", store, "--trials", "2", "-k", "1")
    assert "already exists" in line


def test_report_rebuilds_the_run_from_the_store(tmp_path: Path, store: Path) -> None:
    ran = json.loads(_ok("run", _bench(tmp_path), "--store", store, "--json").output)
    rebuilt = json.loads(_ok("report", "bench", "--store", store, "--json").output)
    # Without -k, the standard set (1, 2, 4), not the run's (1, 2).
    assert rebuilt["k_values"] == [1, 2, 4] and ran["k_values"] == [1, 2]
    assert {k: rebuilt["pass_at_k"][k] for k in ("1", "2")} == ran["pass_at_k"]
    same = ("counts", "started_at", "finished_at", "wall_seconds", "resumed", "finished")
    assert {k: rebuilt[k] for k in same} == {k: ran[k] for k in same}
    assert [t["trials"] for t in rebuilt["tasks"].values()] == [
        t["trials"] for t in ran["tasks"].values()
    ]
    table = _ok("report", "bench", "--store", store, "-k", "1", "-k", "4").output
    assert "pass@1" in table and "pass@4" in table and "pass@2" not in table
    assert "mean of 3 tasks" in table
    assert "'nope'" in _refused("report", "nope", "--store", store)
    assert "k = 5" in _refused("report", "bench", "--store", store, "-k", "5")


def test_run_writes_the_report_file_it_is_asked_for_on_any_store(tmp_path: Path) -> None:
    target = tmp_path / "out" / "r.json"
    args = ("run", _bench(tmp_path), "--store", "memory:", "--no-progress")
    shown = _ok(*args, "--report-file", target).output
    assert json.loads(target.read_text())["counts"]["completed"] == 12
    assert str(target) in shown.replace("\n", "")
    assert "'" + str(tmp_path) + "'" in _refused(*args, "--report-file", tmp_path)


def test_a_report_file_where_no_file_can_be_made_exits_2_before_running(
    tmp_path: Path, store: Path
) -> None:
    """``--report-file /proc/nope/r.json`` ran and stored every trial, then exited 1
    with "No such file or directory: '/proc/nope'", which named no report file."""
    line = _refused("run", _bench(tmp_path), "--store", store, "--report-file", "/proc/nope/r.json")
    assert "report file '/proc/nope/r.json' cannot be written" in line
    assert not store.exists()


def test_a_report_file_failing_at_the_end_says_how_to_write_it_again(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full(path: Path, *args: Any) -> None:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr("corral._runner.write_report", full)
    target = tmp_path / "r.json"
    args = ("run", _bench(tmp_path), "--store", store, "--no-progress", "--report-file", target)
    result = _invoke(*args)
    assert result.exit_code == 1, result.output
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: report file {str(target)!r} could not be written")
    assert f"corral report bench --store {store} -k 1 -k 2 --output {target}" in line
    assert json.loads(_ok("report", "bench", "--store", store, "--json").output)["finished"] == 12


def test_report_output_writes_the_file_a_run_writes_byte_for_byte(
    tmp_path: Path, store: Path
) -> None:
    """The way back a failed report file names (``corral report ... --output FILE``)
    writes the run's file again; the ``--json > FILE`` it named before wrote the same
    data indented otherwise, so the two files differed."""
    _ok("run", _bench(tmp_path), "--store", store, "--no-progress")
    written = (store.parent / "reports" / "bench.json").read_bytes()
    again = tmp_path / "again" / "r.json"
    shown = _ok("report", "bench", "--store", store, "-k", "1,2", "--output", again).output
    assert again.read_bytes() == written
    assert str(again) in shown.replace("\n", "")
    printed = _ok("report", "bench", "--store", store, "-k", "1,2", "--json").output
    assert json.loads(printed) == json.loads(written)
    over = _refused("report", "bench", "--store", store, "--output", store)
    assert "is the store's own file" in over


def test_report_output_to_a_device_writes_into_it(tmp_path: Path, store: Path) -> None:
    """``--output /dev/null`` (here a link to it, which any user may make) is written
    into: the report's file was written beside it and renamed over it, which put a
    file in the place of the link (of ``/dev/null`` itself, run as root)."""
    _ok("run", _bench(tmp_path), "--store", store, "--no-progress")
    device = tmp_path / "null"
    device.symlink_to(os.devnull)
    _ok("report", "bench", "--store", store, "--output", device)
    assert device.is_symlink() and device.is_char_device()
    assert not list(tmp_path.glob(".null.*"))  # no file of its own made beside it


def test_show_prints_a_trials_history_and_its_parents_output(tmp_path: Path, store: Path) -> None:
    _ok("run", _bench(tmp_path), "--store", store, "--no-progress")
    out = _ok("show", "bench", "child", "3", "--store", store).output
    for kind in ("setup", "action", "tool_effect", "terminal", "evaluation"):
        assert kind in out
    assert "child #3 of bench" in out
    assert "echo(value=3)" in out and "state <-" in out
    assert "from parent" in out and "completed -> 3" in out
    assert "failed" in out  # 3 is odd
    data = json.loads(_ok("show", "bench", "child", "3", "--store", store, "--json").output)
    assert [c["kind"] for c in data["commits"]] == [
        "setup",
        "action",
        "tool_effect",
        "terminal",
        "evaluation",
    ]
    assert data["parents"] == {"parent": {"status": "completed", "output": 3}}
    assert "'nope'" in _refused("show", "bench", "nope", "0", "--store", store)
    assert "trial 7" in _refused("show", "bench", "child", "7", "--store", store)
    assert "'other'" in _refused("show", "other", "child", "0", "--store", store)


def test_list_shows_benchmarks_with_finished_over_total(tmp_path: Path, store: Path) -> None:
    _ok("run", _bench(tmp_path), "--store", store, "--no-progress")
    out = _ok("list", "--store", store).output
    assert "bench" in out and "12/12" in out
    missing = tmp_path / "none.db"
    assert "none.db" in _refused("list", "--store", missing)
    assert not missing.exists()  # reading never creates a store


def test_progress_is_plain_when_stdout_is_not_a_terminal(tmp_path: Path, store: Path) -> None:
    out = _ok("run", _bench(tmp_path), "--store", store).output
    assert "\x1b[" not in out and "12/12 trials (100%)" in out


@pytest.mark.slow  # starts a process: a system test
def test_python_dash_m_corral() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "corral", "--help"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0
    for command in ("demo", "run", "report", "show", "list"):
        assert command in done.stdout


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (
            "run",
            {
                "--max-retries": "(default 2)",
                "--backoff-base": "(default 0.5)",
                "--backoff-cap": "(default 30)",
                "--max-rate-limit-wait": "(default 600)",
                "--max-deferrals": "(default 100)",
                "--trial-timeout": "(default: none)",
            },
        ),
        (
            "rescore",
            {
                "--max-retries": "(default: FILE's run_defaults, else 2)",
                "--evaluation-timeout": "trial_timeout, else none)",
            },
        ),
    ],
)
def test_help_states_the_retry_and_timeout_defaults_the_readme_gives(
    command: str, expected: dict[str, str]
) -> None:
    """The README gives max_retries 2, backoff 0.5 and 30 s; the help said none of them."""
    import corral

    policy = corral.RetryPolicy()
    assert (policy.max_retries, policy.backoff_base, policy.backoff_cap) == (2, 0.5, 30.0)
    text = " ".join(CliRunner().invoke(main, [command, "--help"]).output.split())
    for flag, default in expected.items():
        said = text.split(f" {flag} ", 1)[1].split(" --", 1)[0]
        assert default in said, (flag, said)
