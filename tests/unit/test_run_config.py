"""`RunConfig`: run settings as one frozen value, checked part by part, composed with
`run`'s keywords, and built by the CLI from one table of flags."""

from __future__ import annotations

import dataclasses
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import corral
from corral import ConfigError, CorralRunner, Limits, MemoryStore, RetryPolicy, RunConfig
from corral._run_config import SETTINGS, RunSettings, Timeouts
from corral.cli import main
from corral.cli._run_flags import RUN_FLAGS
from corral.testing import FakeEnvironment, ScriptedAgent


def test_the_defaults_are_runs_defaults() -> None:
    config = RunConfig()
    assert config.trials_per_task == 1 and config.k_values == (1,)
    assert config.limits == Limits.resolve() == Limits()
    assert config.retry is None and config.timeouts is None  # the runner's
    assert config.order == "critical_path" and config.rerun == frozenset()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.trials_per_task = 2  # type: ignore[misc]


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"trials_per_task": 0}, "trials_per_task"),
        ({"k_values": (3,), "trials_per_task": 2}, "k = 3"),
        ({"k_values": "12"}, "k_values"),
        ({"order": "lifo"}, "'lifo'"),
        ({"rerun": ["completed"]}, "'completed'"),
        ({"rerun": "error"}, "rerun"),
        ({"fail_on_error": 1.5}, "1.5"),
        ({"fail_on_error": -1}, "-1"),
        ({"run_cost_limit": 0}, "run_cost_limit"),
        ({"token_limit": 0}, "token_limit"),
        ({"trial_timeout": 0}, "trial_timeout"),
        ({"evaluation_timeout": float("nan")}, "evaluation_timeout"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_parallel": 0}, "max_parallel"),
        ({"max_parallel_by_model": {"m": 0}}, "max_parallel_by_model['m']"),
        ({"max_value_bytes": 0}, "max_value_bytes"),
        ({"max_subprocesses": 0}, "max_subprocesses"),
        ({"models": ["a", "a"]}, "'a' is listed twice"),
        ({"include_dependencies": 1}, "include_dependencies"),
        ({"task_ids": "a"}, "task_ids"),
        ({"max_paralel": 2}, "'max_paralel'"),
    ],
)
def test_a_bad_setting_is_refused_naming_it(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RunConfig.of(**settings)
    assert named in str(caught.value)


def test_each_part_checks_itself() -> None:
    with pytest.raises(ConfigError, match="max_parallel_total"):
        Limits(max_parallel_total=0)
    with pytest.raises(ConfigError, match="limits must be a Limits"):
        RunConfig(limits={"max_parallel": 2})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="report_file .* is a directory"):
        RunConfig.of(report_file=Path(__file__).parent)


def test_updated_replaces_one_setting_and_keeps_the_rest_of_its_part() -> None:
    base = RunConfig.of(
        max_parallel=2, max_parallel_by_model={"a": 1}, token_limit=10, max_retries=0
    )
    assert (base.limits.max_parallel_evaluations, base.limits.max_parallel_total) == (2, 4)
    wider = base.updated(max_parallel=8, cost_limit=1.5, backoff_base=0.0)
    # Defaulted limits follow the limit they default from; a keyed one stays.
    assert wider.limits.max_parallel_evaluations == 8 and wider.limits.max_parallel_total == 16
    assert dict(wider.limits.max_parallel_by_model) == {"a": 1}
    assert wider.budget.token_limit == 10 and wider.budget.cost_limit == 1.5
    assert wider.retry == RetryPolicy(max_retries=0, backoff_base=0.0)
    # An evaluation limit set apart from max_parallel stays set.
    fixed = RunConfig.of(max_parallel_evaluations=3).updated(max_parallel=8)
    assert (fixed.limits.max_parallel_evaluations, fixed.limits.max_parallel_total) == (3, 11)
    # A combination is checked as a whole.
    with pytest.raises(ConfigError, match="k = 4 is larger than trials_per_task = 2"):
        RunConfig.of(trials_per_task=4, k_values=(1, 4)).updated(trials_per_task=2)
    assert RunConfig.of(**base.settings()) == base


def test_settings_name_every_keyword_and_the_cli_table_sets_only_those() -> None:
    assert set(SETTINGS) == set(RunSettings.__annotations__)
    flagged = [flag.setting for flag in RUN_FLAGS]
    assert len(flagged) == len(set(flagged)) and set(flagged) <= set(SETTINGS)
    # What no flag sets is an object, not a value on a command line.
    assert set(SETTINGS) - set(flagged) == {"no_retry"}


#: Every settings flag of ``corral run`` before the table: the CLI is unchanged.
RUN_FLAG_NAMES = """--task --sample-id --limit --shuffle --seed --trials -k --max-parallel
--max-parallel-per-task
--max-parallel-evaluations --max-parallel-total --max-parallel-by-model
--max-parallel-by-environment --max-parallel-evaluations-by-environment --order
--no-dependencies --model --max-subprocesses --retry-errors --rerun --fail-on-error
--token-limit --cost-limit --working-time-limit --run-cost-limit --max-retries
--backoff-base --backoff-cap --max-rate-limit-wait --max-deferrals --durability
--trial-timeout --evaluation-timeout --max-value-bytes --progress --no-progress --json
--report-file --executor --ray-address --hosts --ray-timeout --verbose --store
--benchmark-id --tag --note --base-url""".split()


def test_the_run_commands_flags_are_unchanged() -> None:
    from corral.cli._run import run_command

    names = {opt for param in run_command.params for opt in param.opts}
    assert names - {"--k", "-v", "TARGET", "target"} == set(RUN_FLAG_NAMES)


def _runner(**kwargs: Any) -> CorralRunner:
    tasks = {"t": corral.BenchmarkTaskMetadata("a", "e")}
    agent = ScriptedAgent(lambda s: corral.Final(s.trial))
    env = FakeEnvironment(evaluate=lambda trial: corral.Evaluation(1.0, trial.output == 0))
    return CorralRunner(tasks, {"a": agent}, {"e": env}, store=MemoryStore(), **kwargs)


@pytest.mark.anyio
async def test_keywords_win_over_the_config_and_the_runners_policy_fills_in() -> None:
    runner = _runner(max_retries=5, trial_timeout=9.0)
    config = RunConfig.of(trials_per_task=2, k_values=(1, 2), max_parallel=1)
    effective = runner.config(config, trials_per_task=3, backoff_cap=1.0)
    assert effective.trials_per_task == 3 and effective.k_values == (1, 2)
    assert effective.retry is not None and effective.retry.max_retries == 5
    assert effective.retry.backoff_cap == 1.0
    assert effective.timeouts is not None and effective.timeouts.trial == 9.0
    report = await runner.run("b", config, trials_per_task=3)
    assert report.trials_per_task == 3 and report.k_values == (1, 2)
    with pytest.raises(ConfigError, match="second argument must be task ids .* or a RunConfig"):
        await runner.run("b", {"trials_per_task": 2})  # type: ignore[arg-type]


def test_a_configs_retry_policy_and_timeouts_replace_the_runners() -> None:
    runner = _runner(max_retries=5)
    config = RunConfig(retry=RetryPolicy(max_retries=0), timeouts=Timeouts(trial=2.0))
    effective = runner.config(config, evaluation_timeout=3.0)
    assert effective.retry == RetryPolicy(max_retries=0)
    assert effective.timeouts == Timeouts(trial=2.0, evaluation=3.0)


BENCH = textwrap.dedent(
    """
    import corral
    from corral.testing import FakeEnvironment, ScriptedAgent

    def score(trial):
        return corral.Evaluation(1.0, trial.output % 2 == 0)

    benchmark = corral.Benchmark(
        {"t": corral.BenchmarkTaskMetadata("a", "e", model="m1")},
        {"a": ScriptedAgent(lambda session: corral.Final(session.trial))},
        {"e": FakeEnvironment(evaluate=score)},
        run_defaults=corral.RunConfig.of(
            trials_per_task=4, k_values=(1, 2), max_parallel_by_model={"m1": 1}
        ),
    )
    """
)


def test_run_defaults_may_be_a_run_config(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH)
    store = tmp_path / "s.db"
    cli = CliRunner()
    result = cli.invoke(main, ["run", str(bench), "--store", str(store), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["trials_per_task"] == 4 and set(report["pass_at_k"]) == {"1", "2"}
    # A keyed flag merges with the config's mapping: m1 from the file, m2 refused by name.
    bad = cli.invoke(
        main, ["run", str(bench), "--store", str(store), "--max-parallel-by-model", "m2=0"]
    )
    assert bad.exit_code == 2 and "max_parallel_by_model['m2']" in bad.output
    # -k over the file's trials is refused by the config, naming both.
    again = cli.invoke(main, ["run", str(bench), "--store", str(store), "-k", "8"])
    assert again.exit_code == 2 and "k = 8 is larger than trials_per_task = 4" in again.output


@pytest.mark.parametrize("as_config", [True, False], ids=["RunConfig", "mapping"])
def test_trials_under_the_defaults_k_keep_the_ks_they_can_tell(
    tmp_path: Path, as_config: bool
) -> None:
    """A benchmark's pass@2 is for its own 4 trials: ``--trials 1`` reports pass@1,
    not "k = 2 is larger than trials_per_task = 1" (an explicit -k 2 still is)."""
    given = BENCH[BENCH.index("corral.RunConfig.of(") : BENCH.index("),\n)") + 1]
    mapping = '{"trials_per_task": 4, "k_values": [1, 2]}'
    text = BENCH if as_config else BENCH.replace(given, mapping)
    assert as_config or "RunConfig" not in text
    bench = tmp_path / "bench.py"
    bench.write_text(text)
    store = str(tmp_path / "s.db")
    cli = CliRunner()
    result = cli.invoke(main, ["run", str(bench), "--store", store, "--trials", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["trials_per_task"] == 1 and set(report["pass_at_k"]) == {"1"}
    asked = ["run", str(bench), "--store", store, "--trials", "1", "-k", "2"]
    refused = cli.invoke(main, [*asked, "--benchmark-id", "other"])
    assert refused.exit_code == 2 and "k = 2 is larger than trials_per_task = 1" in refused.output


@pytest.mark.parametrize(
    ("ks", "named"),
    [("10", "'10'"), ([1, "5"], "'5'"), ([True, 10], "True"), ([1, 2.0], "2.0")],
    ids=str,
)
def test_trials_keep_the_defaults_bad_k_values_to_refuse(ks: object, named: str) -> None:
    """``--trials`` keeps the defaults' k values up to the trials: one that is no k at
    all (a string, a bool, a float) is still refused, naming it, not silently dropped
    for pass@1."""
    from corral.cli._run_flags import run_config

    with pytest.raises(ConfigError, match="k_values") as refused:
        run_config({"k_values": ks}, {"trials_per_task": 3})
    assert named in str(refused.value)
    assert run_config({"k_values": (1, 4, 10)}, {"trials_per_task": 3}).k_values == (1,)


def test_a_defaulted_count_follows_max_parallel_after_a_replace() -> None:
    """`dataclasses.replace` of a config's limits (the runner's own Ray capacity does it)
    keeps which counts follow the ones they default from; one given stays."""
    config = RunConfig()
    limits = dataclasses.replace(config.limits, max_parallel_per_task=2)
    updated = dataclasses.replace(config, limits=limits).updated(max_parallel=8)
    assert (updated.limits.max_parallel_evaluations, updated.limits.max_parallel_total) == (8, 16)
    pinned = RunConfig.of(max_parallel=4, max_parallel_evaluations=4, max_parallel_total=8)
    limits = dataclasses.replace(pinned.limits, max_parallel_per_task=2)
    updated = dataclasses.replace(pinned, limits=limits).updated(max_parallel=8)
    assert (updated.limits.max_parallel_evaluations, updated.limits.max_parallel_total) == (4, 8)


def test_a_mistyped_run_setting_is_named_with_its_close_match() -> None:
    with pytest.raises(
        ConfigError, match=r"'max_parallel_by_modle'; .*; did you mean 'max_parallel_by_model'"
    ):
        RunConfig.of(max_parallel_by_modle={"m": 1})
