"""Bad input a user gives first (CLI flags, copy, view export, datasets, the
sandbox's options, run settings) is refused before anything runs, or kept as given."""

from __future__ import annotations

import re
import resource
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import corral
from corral import ConfigError, datasets
from corral.cli import main
from corral.progress import PlainProgress, ProgressDisplay

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.py"


def _invoke(*args: Any) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _quickstart_store(tmp_path: Path) -> Path:
    store = tmp_path / "s.db"
    result = _invoke("run", QUICKSTART, "--store", store, "--progress", "none")
    assert result.exit_code == 0, result.output
    return store


# -- corral run flags ------------------------------------------------------------


def test_fail_on_error_zero_is_accepted_as_by_run(tmp_path: Path) -> None:
    """`run(..., fail_on_error=0)` (stop at the first error) is valid; the flag's N is
    "a count", so `--fail-on-error 0` must be too, not refused as "not 0.0"."""
    corral.RunConfig.of(fail_on_error=0)  # the library takes it
    result = _invoke(
        "run",
        QUICKSTART,
        "--store",
        tmp_path / "s.db",
        "--progress",
        "none",
        "--fail-on-error",
        "0",
    )
    assert result.exit_code == 0, result.output


def test_empty_report_file_is_refused_not_ignored(tmp_path: Path) -> None:
    """`report_file=""` is a ConfigError from Python; `--report-file ""` silently
    wrote the report to the default place instead."""
    with pytest.raises(ConfigError):
        corral.RunConfig.of(report_file="")
    store = tmp_path / "s.db"
    result = _invoke("run", QUICKSTART, "--store", store, "--progress", "none", "--report-file", "")
    assert result.exit_code == 2, result.output
    assert "report_file" in result.stderr
    assert not store.exists()


def test_seed_without_shuffle_names_the_flags(tmp_path: Path) -> None:
    """`--seed 3` alone said "give shuffle=True too", the library's keyword, which no
    one types at a shell; it names `--shuffle`. With `--shuffle` it runs."""
    store = tmp_path / "s.db"
    result = _invoke("run", QUICKSTART, "--store", store, "--progress", "none", "--seed", "3")
    assert result.exit_code == 2, result.output
    assert "--seed 3 orders a shuffle: give --shuffle too" in result.stderr
    assert not store.exists()
    result = _invoke(
        "run", QUICKSTART, "--store", store, "--progress", "none", "--seed", "3", "--shuffle"
    )
    assert result.exit_code == 0, result.output


def test_task_and_sample_id_together_name_the_flags(tmp_path: Path) -> None:
    """`--task` with `--sample-id` said "give task_ids or sample_ids, not both"."""
    store = tmp_path / "s.db"
    args = ("--task", "add", "--sample-id", "add")
    result = _invoke("run", QUICKSTART, "--store", store, "--progress", "none", *args)
    assert result.exit_code == 2, result.output
    assert "give --task or --sample-id, not both" in result.stderr
    assert not store.exists()


# -- corral copy -----------------------------------------------------------------


def test_copy_of_an_unknown_benchmark_creates_no_destination(tmp_path: Path) -> None:
    store = _quickstart_store(tmp_path)
    destination = tmp_path / "copy.db"
    result = _invoke("copy", store, destination, "--benchmark", "nope")
    assert result.exit_code == 2, result.output
    assert "nope" in result.stderr
    assert not destination.exists(), "a refused copy wrote an empty store file"


def test_copy_of_a_mistyped_benchmark_names_its_close_matches(tmp_path: Path) -> None:
    """A mistyped id comes with its close matches, as `report` and `show` give them."""
    store = _quickstart_store(tmp_path)
    result = _invoke("copy", store, tmp_path / "copy.db", "--benchmark", "quickstrat")
    assert result.exit_code == 2, result.output
    assert "did you mean 'quickstart'?" in result.stderr, result.stderr


# -- corral view --export --------------------------------------------------------


def test_view_export_to_an_empty_path_is_bad_input(tmp_path: Path) -> None:
    store = _quickstart_store(tmp_path)
    result = _invoke("view", "--store", store, "--export", "quickstart", "-o", "")
    assert result.exit_code == 2, result.output


def test_view_export_of_a_mistyped_benchmark_names_its_close_matches(tmp_path: Path) -> None:
    store = _quickstart_store(tmp_path)
    page = tmp_path / "page.html"
    result = _invoke("view", "--store", store, "--export", "quickstrat", "-o", page)
    assert result.exit_code == 2, result.output
    assert "did you mean 'quickstart'?" in result.stderr, result.stderr
    assert not page.exists()


def test_view_export_into_a_missing_folder_is_bad_input(tmp_path: Path) -> None:
    """`-o` in a folder that is not there is refused (exit 2, naming the folder) before
    the benchmark is read, not a failure (exit 1) once the page is made."""
    store = _quickstart_store(tmp_path)
    page = tmp_path / "no-such-folder" / "page.html"
    result = _invoke("view", "--store", store, "--export", "quickstart", "-o", page)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(page.parent) in lines[0], result.stderr


# -- datasets --------------------------------------------------------------------


def _jsonl(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda d: datasets.from_jsonl(3, agent_id="a", environment_id="e"), "path"),
        (lambda d: datasets.from_csv(3, agent_id="a", environment_id="e"), "path"),
        (
            lambda d: datasets.from_jsonl(d, agent_id="a", environment_id="e", spool_dir=3),
            "spool_dir",
        ),
        (lambda d: corral.TaskSource.from_iterable([], spool_dir=3), "spool_dir"),
        (lambda d: corral.TaskSource(3), "path"),
        (lambda d: corral.SQLiteStore(3), "path"),
    ],
    ids=["jsonl", "csv", "spool_dir", "from_iterable", "task_source", "sqlite"],
)
def test_a_path_that_is_no_path_is_refused_by_name(tmp_path: Path, make: Any, named: str) -> None:
    """A number given for a file or folder was a TypeError from `Path` or the OS."""
    data = _jsonl(tmp_path / "data.jsonl", '{"id": "a", "input": "q", "target": "1"}')
    with pytest.raises(ConfigError, match=f"{named} must be a path, not 3"):
        make(data)


def test_refused_dataset_leaves_no_spool_file(tmp_path: Path) -> None:
    data = _jsonl(
        tmp_path / "data.jsonl",
        '{"id": "a", "input": "q1", "target": "1"}',
        '{"id": "a", "input": "q2", "target": "2"}',
    )
    spool = tmp_path / "spool"
    spool.mkdir()
    with pytest.raises(ConfigError):
        datasets.from_jsonl(data, agent_id="x", environment_id="e", spool_dir=spool)
    assert list(spool.iterdir()) == [], "the refused dataset's spooled task file was left"


def test_refused_item_is_named_not_by_the_temporary_spool_file(tmp_path: Path) -> None:
    data = _jsonl(
        tmp_path / "data.jsonl",
        '{"id": "a", "input": "q1", "target": "1"}',
        '{"id": "a", "input": "q2", "target": "2"}',
    )
    with pytest.raises(ConfigError) as caught:
        datasets.from_jsonl(data, agent_id="x", environment_id="e", spool_dir=tmp_path)
    assert "corral-tasks-" not in str(caught.value), str(caught.value)


def test_csv_row_with_fewer_values_than_the_header_is_refused(tmp_path: Path) -> None:
    """A row with more values than the header is a ConfigError; one with fewer got
    None for the missing fields: a task silently without its target."""
    path = tmp_path / "quiz.csv"
    path.write_text("id,input,target\na,q1,1\nb,q2\n")
    with pytest.raises(ConfigError, match="quiz.csv:3"):
        datasets.from_csv(path, agent_id="x", environment_id="e", spool_dir=tmp_path)


# -- corral.sandbox --------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_sandbox_huge_timeout_runs_the_command() -> None:
    """A timeout past what setrlimit takes (the CPU limit defaults to it) ran the
    wrapper into an OverflowError: status 1 and a traceback, as if the user's command
    had failed."""
    result = await corral.sandbox(["true"], timeout=1e30, isolation="none")
    assert result.returncode == 0, result.stderr


@pytest.mark.anyio
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
async def test_sandbox_processes_above_the_host_limit_is_a_config_error() -> None:
    """``processes`` above the host's hard RLIMIT_NPROC cannot be set inside the
    sandbox: every command "exited 1" with the wrapper's ValueError traceback as its
    stderr and no reason, indistinguishable from the user's program failing."""
    hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard process limit here")
    with pytest.raises(ConfigError, match="processes"):
        await corral.sandbox(["true"], timeout=5, processes=hard + 1)


@pytest.mark.anyio
@pytest.mark.parametrize("given", [True, "/usr"], ids=["flag", "one-path"])
async def test_sandbox_read_only_that_is_no_list_of_folders_is_refused_naming_it(
    tmp_path: Path, given: object
) -> None:
    """`read_only=True` (a flag, as a store's `read_only` is) was a TypeError from
    iterating it, and `read_only="/usr"` was read letter by letter ("'u' is not an
    existing absolute path")."""
    ran = tmp_path / "ran"
    with pytest.raises(
        ConfigError, match=re.escape(f"read_only must be a list of host folders, not {given!r}")
    ):
        await corral.sandbox(["touch", str(ran)], timeout=5, read_only=given)  # type: ignore[arg-type]
    assert not ran.exists()


@pytest.mark.anyio
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
async def test_sandbox_disk_none_is_a_config_error() -> None:
    """``disk`` (an int, unlike memory/processes/file_size) took None, and bubblewrap
    then failed to start: a CorralError at run time, not a ConfigError."""
    with pytest.raises(ConfigError, match="disk"):
        await corral.sandbox(["true"], timeout=5, disk=None)  # type: ignore[arg-type]


@pytest.mark.anyio
@pytest.mark.parametrize("network", ["no", "false", 1, None])
async def test_sandbox_network_that_is_not_true_or_false_is_a_config_error(network: Any) -> None:
    """``network`` was read by its truth: ``network="no"`` (a setting read from a file)
    gave the command the host's network, which the sandbox promises only for
    ``network=True``. Refused before anything runs, as the scorers' flags are."""
    with pytest.raises(ConfigError, match=f"network must be True or False, not {network!r}"):
        await corral.sandbox(["true"], timeout=5, network=network)


@pytest.mark.anyio
async def test_sandbox_input_that_is_neither_text_nor_bytes_is_refused_before_it_runs(
    tmp_path: Path,
) -> None:
    """It reached the command's standard input: the command ran, then a TypeError in an
    ExceptionGroup came out, not a `ConfigError` naming the value."""
    ran = tmp_path / "ran"
    with pytest.raises(ConfigError, match=r"input must be text, bytes or None, not 3"):
        await corral.sandbox(["touch", str(ran)], timeout=5, input=3, isolation="none")  # type: ignore[arg-type]
    assert not ran.exists()


# -- RunConfig -------------------------------------------------------------------


def test_an_evaluation_limit_given_is_kept_by_updated() -> None:
    """Given explicitly, max_parallel_evaluations=8 must stay 8 when max_parallel
    changes, as it does when the same run_defaults are a mapping (`corral run
    --max-parallel 32` over them)."""
    from corral.cli._run_flags import run_config

    settings = {"max_parallel": 8, "max_parallel_evaluations": 8, "max_parallel_total": 16}
    as_mapping = run_config(settings, {"max_parallel": 32}).limits
    as_config = run_config(corral.RunConfig.of(**settings), {"max_parallel": 32}).limits
    assert as_mapping.max_parallel_evaluations == 8
    assert as_config.max_parallel_evaluations == as_mapping.max_parallel_evaluations
    assert as_config.max_parallel_total == as_mapping.max_parallel_total


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"shuffle": "no"}, "shuffle must be True or False, not 'no'"),
        ({"shuffle": 1}, "shuffle must be True or False, not 1"),
        ({"seed": "3"}, "seed must be an integer, not '3'"),
        ({"limit": 0}, "limit must be a positive integer, not 0"),
    ],
)
def test_a_run_config_refuses_a_bad_sample_setting_when_built(
    settings: dict[str, Any], named: str
) -> None:
    """`RunConfig` is "checked when built", yet took `shuffle="no"`, a seed of "3" and
    a limit of 0 (refused only once a run used them), where `include_dependencies="no"`
    was refused at once."""
    with pytest.raises(ConfigError, match=named):
        corral.RunConfig.of(**settings)
    with pytest.raises(ConfigError, match=named):
        corral.RunConfig(**settings)


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True])
def test_a_ray_executor_refuses_a_bad_max_host_restarts(bad: Any) -> None:
    """-1 was taken, and the run failed at its first dead host saying it died "more
    than max_host_restarts=-1" times."""
    with pytest.raises(ConfigError, match=f"max_host_restarts.*{bad!r}"):
        corral.RayExecutor(max_host_restarts=bad)


# -- run / rescore keywords ------------------------------------------------------


@pytest.mark.parametrize("kind", ["run", "rescore"])
def test_scopes_that_are_no_registry_are_refused_by_run_and_rescore(kind: str) -> None:
    """`run(..., scopes=x)` refuses what is not a `ConcurrencyScopes` with a
    `ConfigError`; `rescore` took it and failed with an `AttributeError` once it used it."""
    import anyio

    from corral.testing import FakeEnvironment, ScriptedAgent

    runner = corral.CorralRunner(
        {"t": corral.BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent()},
        {"e": FakeEnvironment()},
        store=corral.MemoryStore(),
    )

    async def main() -> None:
        await runner.run("b")
        call = runner.run if kind == "run" else runner.rescore
        with pytest.raises(ConfigError, match="scopes must be a ConcurrencyScopes"):
            await call("b", scopes={"api": 2})  # type: ignore[arg-type]

    anyio.run(main)


# -- progress views --------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda: ProgressDisplay(transient="no"), "transient must be True or False, not 'no'"),
        (lambda: ProgressDisplay(refresh_per_second=0), "refresh_per_second must be a positive"),
        (lambda: ProgressDisplay(refresh_per_second="8"), "refresh_per_second must be a positive"),
        (lambda: PlainProgress(interval=-1), "interval must be a non-negative number, not -1"),
        (lambda: PlainProgress(interval="5"), "interval must be a non-negative number"),
        (lambda: PlainProgress(tick=0), "tick must be a positive number of seconds"),
    ],
)
def test_a_progress_view_refuses_bad_settings_by_name(make: Any, named: str) -> None:
    """`transient="no"` was read by its truth (the display cleared at the end), a
    refresh rate of 0 was a ZeroDivisionError, a tick of 0 set the view's timer
    spinning with no pause, and an interval of "5" failed at the first commit: each is
    a ConfigError naming the setting."""
    with pytest.raises(ConfigError, match=named):
        make()


def test_plain_progress_with_no_interval_writes_at_every_commit_without_spinning() -> None:
    """`interval=0` (a line at every commit) is taken; its timer, for lines while no
    commit arrives, waited 0 s between rounds: a loop that never paused."""
    assert PlainProgress(interval=0)._tick_every == 1.0
    assert PlainProgress(interval=0.25)._tick_every == 0.25
