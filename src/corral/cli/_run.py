"""``corral run`` and ``corral demo``: run a benchmark, show progress, print pass@k."""

from __future__ import annotations

import contextlib
import importlib.util
import inspect
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import anyio
import click

from .._benchmark import Benchmark
from .._errors import ConfigError, CorralError
from .._runner import DEFAULT_STORE, CorralRunner
from ..demo import PROVIDERS, build_demo, check_endpoint, demo_retry_policy, demo_server
from ..executor import RayExecutor, default_log_file
from ..report._passk import default_ks
from ..runtime import RetryPolicy
from ..scheduler import Limits
from ..store import CommitStore
from ._execute import EXIT_FAILED, EXIT_OK, make_console, run_benchmark
from ._load import benchmark_module, load_benchmark
from ._options import durability_option, k_option, keyed_limit_option, open_store, store_option
from ._progress import Progress, progress_choice, progress_option

#: Keyword arguments of `CorralRunner.run` that flags and ``run_defaults`` may set.
RUN_ARGUMENTS = tuple(
    name
    for name in inspect.signature(CorralRunner.run).parameters
    if name not in ("self", "benchmark_id", "observers", "scopes")
)
#: Constructor arguments that flags and ``run_defaults`` may set.
RUNNER_ARGUMENTS = (
    "max_retries",
    "trial_timeout",
    "evaluation_timeout",
    "backoff_base",
    "backoff_cap",
    "max_rate_limit_wait",
    "max_deferrals",
)
#: The default limits, for the flags' help.
LIMITS = Limits()
KEYED_LIMITS = (
    "max_parallel_by_model",
    "max_parallel_by_environment",
    "max_parallel_evaluations_by_environment",
)


def merge_settings(
    defaults: Mapping[str, Any], flags: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(runner kwargs, run kwargs): ``defaults`` overridden by the flags that were given
    (``None`` = not given). Keyed limits merge, so ``--max-parallel-by-model a=1``
    keeps the defaults' other models."""
    unknown = sorted(set(defaults) - set(RUN_ARGUMENTS) - set(RUNNER_ARGUMENTS))
    if unknown:
        raise ConfigError(
            f"run_defaults has unknown key(s) {', '.join(map(repr, unknown))}; expected "
            "arguments of CorralRunner.run, max_retries or trial_timeout"
        )
    settings = dict(defaults)
    for name, value in flags.items():
        if value is None:
            continue
        if name in KEYED_LIMITS and isinstance(settings.get(name), Mapping):
            value = {**settings[name], **value}
        settings[name] = value
    runner = {k: v for k, v in settings.items() if k in RUNNER_ARGUMENTS}
    run = {k: v for k, v in settings.items() if k in RUN_ARGUMENTS}
    return runner, run


def _given(values: tuple[str, ...]) -> tuple[str, ...] | None:
    return values or None


def tag_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--tag`` (repeatable) and ``--note``: recorded with the run, shown by ``corral
    report``, ``corral list --tag`` finds it."""
    command = click.option(
        "--note", help="Free text recorded with the run (shown by corral report)."
    )(command)
    return click.option(
        "--tag",
        "run_tags",
        multiple=True,
        help="A label recorded with the run; corral list --tag finds it (repeatable).",
    )(command)


@click.command("run")
@click.argument("target", metavar="FILE[:OBJECT]")
@click.option("--benchmark-id", help="Id to record under (default: the file's stem).")
@store_option
@click.option("--task", "tasks", multiple=True, help="Run only this task (repeatable).")
@click.option(
    "--sample-id", "sample_ids", multiple=True, help="Run only this sample (task id; repeatable)."
)
@click.option("--limit", type=int, help="Run only the first N tasks (after --shuffle).")
@click.option("--shuffle", is_flag=True, default=None, help="Draw the tasks in a seeded order.")
@click.option("--seed", type=int, help="The seed of --shuffle (default 0): the same sample.")
@click.option("--trials", type=int, help="Trials per task.")
@k_option
@click.option(
    "--max-parallel", type=int, help=f"Running trial executions (default {LIMITS.max_parallel})."
)
@click.option(
    "--max-parallel-per-task",
    type=int,
    help=f"Running executions of one task (default {LIMITS.max_parallel_per_task}: a "
    "task's trials run one after another, each seeing the previous one's evaluation).",
)
@click.option(
    "--max-parallel-evaluations", type=int, help="Running evaluations (default: --max-parallel)."
)
@click.option(
    "--max-parallel-total",
    type=int,
    help="Executions plus evaluations (default: --max-parallel + --max-parallel-evaluations).",
)
@keyed_limit_option(
    "--max-parallel-by-model", "Executions on one model (default: only --max-parallel)"
)
@keyed_limit_option(
    "--max-parallel-by-environment", "Executions in one environment (default: only --max-parallel)"
)
@keyed_limit_option(
    "--max-parallel-evaluations-by-environment",
    "Evaluations in one environment (default: only --max-parallel-evaluations)",
)
@click.option(
    "--order",
    type=click.Choice(["critical_path", "fifo"]),
    help="Which ready trial starts first (default: critical_path).",
)
@click.option(
    "--no-dependencies",
    is_flag=True,
    help="Do not add the selected tasks' ancestors; refuse a selection missing one.",
)
@click.option(
    "--model",
    "models",
    multiple=True,
    metavar="NAME[,NAME...]",
    help="Run every task once on each model, side by side (repeatable, or a,b).",
)
@click.option(
    "--max-subprocesses",
    type=int,
    help="corral.subprocess calls at once (default: the CPUs this process may use).",
)
@click.option(
    "--retry-errors",
    is_flag=True,
    help="Give trials that ended error or timeout a fresh attempt (the earlier one is kept).",
)
@click.option(
    "--rerun",
    "rerun",
    multiple=True,
    type=click.Choice(["error", "timeout", "max_iterations", "unreachable", "limit"]),
    help="Give trials that ended with this status a fresh attempt (repeatable).",
)
@click.option(
    "--fail-on-error",
    type=float,
    metavar="N",
    help="Stop starting trials once more than N (a count, or a fraction below 1 of the "
    "trials) errored or failed scoring; the benchmark stays resumable.",
)
@click.option(
    "--token-limit", type=int, help="Input + output tokens one trial may use (a task's own wins)."
)
@click.option("--cost-limit", type=float, help="Cost one trial may spend (a task's own wins).")
@click.option(
    "--working-time-limit",
    type=float,
    help="Seconds one trial may spend working, not queued or backing off (a task's own wins).",
)
@click.option(
    "--run-cost-limit",
    type=float,
    help="Stop starting trials once the benchmark's recorded cost reaches this; run "
    "again with a higher one to continue.",
)
@click.option("--max-retries", type=int, help="Extra attempts after an attempt raises.")
@click.option("--backoff-base", type=float, help="Backoff before retry n: U(0, base*2**n) s.")
@click.option("--backoff-cap", type=float, help="Longest backoff before a retry, in seconds.")
@click.option(
    "--max-rate-limit-wait", type=float, help="Longest wait for one rate limit, in s (600)."
)
@click.option(
    "--max-deferrals", type=int, help="Rate-limit waits of one trial before it ends error (100)."
)
@durability_option
@click.option("--trial-timeout", type=float, help="Seconds for one attempt's execution.")
@click.option(
    "--evaluation-timeout",
    type=float,
    help="Seconds for one call of evaluate (default: --trial-timeout).",
)
@click.option(
    "--max-value-bytes",
    type=int,
    help="Most bytes of JSON one recorded value may take; a larger one fails its "
    "attempt (default 4 MiB).",
)
@progress_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option(
    "--report-file",
    metavar="PATH",
    help="Also write the report as JSON here (default: reports/ID.json beside an SQLite store).",
)
@click.option(
    "--executor",
    type=click.Choice(["local", "ray"]),
    default="local",
    show_default=True,
    help="Where trials run: in this process, or on Ray hosts (admission stays here).",
)
@click.option("--ray-address", help="Ray cluster to join ('auto', ray://...; default: start one).")
@click.option("--hosts", type=int, help="Ray hosts (actors) that run trials (default 1).")
@click.option(
    "--ray-timeout", type=float, help="Seconds to wait for joining --ray-address (default 60)."
)
@click.option("-v", "--verbose", is_flag=True, help="Say where Ray's own logs go.")
@click.option(
    "--base-url",
    help="The model endpoint, for a benchmark whose function takes base_url "
    "(corral.benchmarks.humaneval); OPENAI_API_KEY is its key.",
)
@tag_options
def run_command(
    target: str,
    benchmark_id: str | None,
    store: str,
    tasks: tuple[str, ...],
    sample_ids: tuple[str, ...],
    limit: int | None,
    shuffle: bool | None,
    seed: int | None,
    trials: int | None,
    ks: tuple[int, ...],
    max_parallel: int | None,
    max_parallel_per_task: int | None,
    max_parallel_evaluations: int | None,
    max_parallel_total: int | None,
    max_parallel_by_model: dict[str, int] | None,
    max_parallel_by_environment: dict[str, int] | None,
    max_parallel_evaluations_by_environment: dict[str, int] | None,
    order: str | None,
    no_dependencies: bool,
    models: tuple[str, ...],
    max_subprocesses: int | None,
    max_retries: int | None,
    backoff_base: float | None,
    backoff_cap: float | None,
    max_rate_limit_wait: float | None,
    max_deferrals: int | None,
    durability: str,
    trial_timeout: float | None,
    evaluation_timeout: float | None,
    max_value_bytes: int | None,
    retry_errors: bool,
    rerun: tuple[str, ...],
    fail_on_error: float | None,
    token_limit: int | None,
    cost_limit: float | None,
    working_time_limit: float | None,
    run_cost_limit: float | None,
    progress: str | None,
    no_progress: bool,
    as_json: bool,
    report_file: str | None,
    executor: str,
    ray_address: str | None,
    hosts: int | None,
    ray_timeout: float | None,
    verbose: bool,
    base_url: str | None,
    run_tags: tuple[str, ...],
    note: str | None,
) -> int:
    """Run (or resume) the benchmark that FILE defines.

    FILE may also be a module name (corral.benchmarks.humaneval). OBJECT
    (default: benchmark) is a corral.Benchmark, or a function returning one
    (given --base-url, if set). Its run_defaults are the defaults of these flags;
    NAME=N limits are merged into them. Running again with the same
    --benchmark-id resumes.
    """
    shown = progress_choice(progress, no_progress)
    flags: dict[str, Any] = {
        "task_ids": _given(tasks),
        "sample_ids": _given(sample_ids),
        "limit": limit,
        "shuffle": shuffle,
        "seed": seed,
        "trials_per_task": trials,
        "k_values": ks or None,
        "max_parallel": max_parallel,
        "max_parallel_per_task": max_parallel_per_task,
        "max_parallel_evaluations": max_parallel_evaluations,
        "max_parallel_total": max_parallel_total,
        "max_parallel_by_model": max_parallel_by_model,
        "max_parallel_by_environment": max_parallel_by_environment,
        "max_parallel_evaluations_by_environment": max_parallel_evaluations_by_environment,
        "include_dependencies": False if no_dependencies else None,
        "order": order,
        "models": _names(models),
        "max_subprocesses": max_subprocesses,
        "max_retries": max_retries,
        "backoff_base": backoff_base,
        "backoff_cap": backoff_cap,
        "max_rate_limit_wait": max_rate_limit_wait,
        "max_deferrals": max_deferrals,
        "trial_timeout": trial_timeout,
        "evaluation_timeout": evaluation_timeout,
        "max_value_bytes": max_value_bytes,
        "rerun": _reruns(retry_errors, rerun),
        "fail_on_error": _count_or_fraction(fail_on_error),
        "token_limit": token_limit,
        "cost_limit": cost_limit,
        "working_time_limit": working_time_limit,
        "run_cost_limit": run_cost_limit,
        "report_file": report_file,
        "tags": run_tags or None,
        "note": note,
    }
    ray = _executor(executor, ray_address, hosts, ray_timeout)
    if ray is not None and verbose:
        click.echo(f"Ray's logs: {ray.log_file}", err=True)
    benchmark, path = load_benchmark(target, base_url)
    file_module = sys.modules.get(benchmark_module(path))
    if ray is not None and file_module is not None:
        # Hosts cannot import the file by its name: its code travels along (a module
        # imported by name, they import alike).
        ray.pickle_by_value(file_module)
    runner_kwargs, run_kwargs = merge_settings(benchmark.run_defaults, flags)
    run_kwargs["source"] = path
    runner = _runner(benchmark, open_store(store, durability), executor=ray, **runner_kwargs)
    try:
        return run_benchmark(
            make_console(),
            runner,
            path.stem if benchmark_id is None else benchmark_id,
            run_kwargs,
            progress=shown,
            as_json=as_json,
        )
    finally:
        if ray is not None:  # the local Ray it started is gone before this command exits
            ray.shutdown()


def _executor(
    kind: str, address: str | None, hosts: int | None, timeout: float | None
) -> RayExecutor | None:
    if kind == "ray":  # Ray's own logs go to a file, not over the live display
        return RayExecutor(
            address,
            1 if hosts is None else hosts,
            log_file=default_log_file(),
            connect_timeout=60.0 if timeout is None else timeout,
        )
    for flag, value in (("--ray-address", address), ("--hosts", hosts), ("--ray-timeout", timeout)):
        if value is not None:
            raise ConfigError(f"{flag} {value} needs --executor ray")
    return None


def _reruns(retry_errors: bool, statuses: tuple[str, ...]) -> tuple[str, ...] | None:
    chosen = [*(("error", "timeout") if retry_errors else ()), *statuses]
    return tuple(dict.fromkeys(chosen)) or None


def _count_or_fraction(value: float | None) -> float | None:
    """``--fail-on-error 3`` is the count 3, not the float 3.0."""
    return int(value) if value is not None and value >= 1 and value.is_integer() else value


def _names(values: tuple[str, ...]) -> tuple[str, ...] | None:
    names = tuple(n.strip() for value in values for n in value.split(","))
    if "" in names:
        raise ConfigError(f"--model: an empty model name in {', '.join(map(repr, values))}")
    return names or None


def _runner(benchmark: Benchmark, store: CommitStore, **kwargs: Any) -> CorralRunner:
    return CorralRunner(
        benchmark.tasks, benchmark.agents, benchmark.environments, store=store, **kwargs
    )


@click.command("rescore")
@click.argument("benchmark_id")
@click.argument("target", metavar="FILE[:OBJECT]")
@store_option
@click.option("--task", "tasks", multiple=True, help="Rescore only this task (repeatable).")
@click.option("--failed-only", is_flag=True, help="Only trials that did not pass.")
@k_option
@click.option("--max-parallel-evaluations", type=int, help="Evaluations at once (default 4).")
@keyed_limit_option("--max-parallel-evaluations-by-environment", "Evaluations in one environment")
@click.option("--max-retries", type=int, help="Extra attempts after evaluate raises.")
@click.option("--evaluation-timeout", type=float, help="Seconds for one call of evaluate.")
@durability_option
@progress_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@tag_options
def rescore_command(
    benchmark_id: str,
    target: str,
    store: str,
    tasks: tuple[str, ...],
    failed_only: bool,
    ks: tuple[int, ...],
    max_parallel_evaluations: int | None,
    max_parallel_evaluations_by_environment: dict[str, int] | None,
    max_retries: int | None,
    evaluation_timeout: float | None,
    durability: str,
    progress: str | None,
    no_progress: bool,
    as_json: bool,
    run_tags: tuple[str, ...],
    note: str | None,
) -> int:
    """Score BENCHMARK_ID's finished trials again with the scorers FILE defines now.

    Each new score is a new evaluation commit; the report uses the latest and
    the earlier ones stay in the history (corral show). Nothing else runs, and
    a changed scorer is not a changed configuration. Prints the report of the
    rescored tasks; exit codes as for corral run.
    """
    shown = progress_choice(progress, no_progress)
    benchmark, _ = load_benchmark(target)
    runner_kwargs, _unused = merge_settings(
        {k: v for k, v in benchmark.run_defaults.items() if k in RUNNER_ARGUMENTS},
        {"max_retries": max_retries, "evaluation_timeout": evaluation_timeout},
    )
    runner = _runner(benchmark, open_store(store, durability, create=False), **runner_kwargs)
    settings: dict[str, Any] = {
        "task_ids": _given(tasks),
        "failed_only": failed_only,
        "k_values": _rescore_ks(runner.store, benchmark_id, ks, benchmark.run_defaults),
        "max_parallel_evaluations": max_parallel_evaluations,
        "max_parallel_evaluations_by_environment": max_parallel_evaluations_by_environment,
        "tags": run_tags or None,
        "note": note,
    }
    return run_benchmark(
        make_console(),
        runner,
        benchmark_id,
        {k: v for k, v in settings.items() if v is not None},
        progress=shown,
        as_json=as_json,
        rescore=True,
    )


def _rescore_ks(
    store: CommitStore, benchmark_id: str, given: tuple[int, ...], defaults: Mapping[str, Any]
) -> tuple[int, ...] | None:
    """A rescore's k values: ``-k`` as given, else the file's own (pass@1 alone hides its
    k) that the stored trial count allows, else `default_ks` of it, as `corral report`.
    None when nothing is stored: the rescore says so."""
    trials = anyio.run(_stored_trials, store, benchmark_id)
    if trials is None:
        return given or None
    if given:
        for k in given:
            if k > trials:
                raise ConfigError(
                    f"-k {k} is larger than the {trials} trials per task "
                    f"benchmark {benchmark_id!r} ran with"
                )
        return given
    wanted = defaults.get("k_values")
    ks = [k for k in wanted if type(k) is int and 0 < k <= trials] if wanted else []
    return tuple(ks) or default_ks(trials)


async def _stored_trials(store: CommitStore, benchmark_id: str) -> int | None:
    async with store.opened():
        config = await store.benchmark_config(benchmark_id)
    trials = config.get("trials_per_task") if config else None
    return trials if type(trials) is int and trials > 0 else None


@click.command("demo")
@store_option
@durability_option
@click.option("--benchmark-id", help="Default: demo-<UTC timestamp>, a fresh run each time.")
@progress_option
@click.option("--fast", is_flag=True, help="No simulated latency (same results, instantly).")
@click.option(
    "--base-url",
    help="Run the same tasks on a real endpoint (with --model); OPENAI_API_KEY "
    "(or ANTHROPIC_API_KEY) is its key. Default: a local scripted server.",
)
@click.option("--model", "model_names", multiple=True, help="A model at --base-url (repeatable).")
@click.option(
    "--provider",
    type=click.Choice(PROVIDERS),
    default="openai",
    show_default=True,
    help="The API the models speak: openai (any OpenAI-compatible endpoint) or "
    "anthropic (the Messages API, through corral.models.Anthropic; with --model and "
    "no --base-url, Anthropic's own).",
)
def demo_command(
    store: str,
    durability: str,
    benchmark_id: str | None,
    progress: str | None,
    no_progress: bool,
    fast: bool,
    base_url: str | None,
    model_names: tuple[str, ...],
    provider: str,
) -> int:
    """Run the built-in demo: tool-calling agents, no network, no keys.

    Two models on a local scripted OpenAI-compatible server, two environments
    (a number search; a calculator with parallel, flaky tool calls), a plan ->
    build -> verify chain, 4 trials per task and pass@1, 2, 4. A few trials end
    in error on purpose, to show how errors look: the demo still exits 0 once
    it has run. With --base-url and --model, the same tasks run on a real model,
    after one first call to each (an unreachable endpoint or a refused key is an
    error, exit 2), and it exits as `corral run` does. --provider anthropic
    speaks Anthropic's Messages API instead: to a local scripted server, or with
    --model to Claude (ANTHROPIC_API_KEY; --base-url for another endpoint).
    """
    shown = progress_choice(progress, no_progress)
    if importlib.util.find_spec("httpx") is None:
        raise CorralError(
            "corral demo needs httpx: install the models extra, "
            "pip install 'corral[models]' (in a checkout: pip install -e '.[models]')"
        )
    if (base_url is not None and not model_names) or (
        model_names and base_url is None and provider == "openai"
    ):
        raise ConfigError(
            "give --base-url and --model together (or neither, for the local demo; "
            "with --provider anthropic, --model alone is Anthropic's API)"
        )
    latency = 0.0 if fast else 1.0
    with contextlib.ExitStack() as stack:
        if not model_names:
            url = stack.enter_context(demo_server(latency, provider))
            # Never send a real key to it.
            benchmark = build_demo(url, latency, api_key="", provider=provider)
            policy = demo_retry_policy(latency)
            where = None
        else:
            benchmark = build_demo(base_url, latency, models=model_names, provider=provider)
            client: Any = getattr(next(iter(benchmark.agents.values())), "model", None)
            where = base_url or str(getattr(client, "base_url", provider))
            check_endpoint(benchmark, where)
            policy = RetryPolicy(max_retries=2, backoff_base=2.0)
        return _demo(benchmark, policy, store, durability, benchmark_id, shown, where, provider)


def _demo(
    benchmark: Benchmark,
    policy: RetryPolicy,
    store: str,
    durability: str,
    benchmark_id: str | None,
    progress: Progress,
    base_url: str | None,
    provider: str,
) -> int:
    if benchmark_id is None:
        benchmark_id = f"demo-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    runner = CorralRunner(
        benchmark.tasks,
        benchmark.agents,
        benchmark.environments,
        store=open_store(store, durability),
        retry_policy=policy,
    )
    defaults = benchmark.run_defaults
    models = sorted({m.model for m in benchmark.tasks.values() if m.model})
    console = make_console()
    console.print(
        f"[bold cyan]corral demo[/]: {len(benchmark.tasks)} tasks x "
        f"{defaults['trials_per_task']} trials on {', '.join(models)} in "
        f"{', '.join(benchmark.environments)}; benchmark id [bold]{benchmark_id}[/]",
        highlight=False,
        markup=True,
    )
    where = f"the models at {base_url}"
    if base_url is None:
        where = "scripted models on 127.0.0.1 (--base-url URL --model NAME for a real one)"
    if provider == "anthropic":
        where += " over Anthropic's Messages API"
    console.print(f"ToolAgent with {where}", style="dim", highlight=False)
    code = run_benchmark(console, runner, benchmark_id, defaults, progress=progress)
    store_flag = "" if store == DEFAULT_STORE else f" --store {store}"
    console.print(
        f"next: corral show {benchmark_id} bid-build 0{store_flag}  ·  "
        f"corral report {benchmark_id}{store_flag}  ·  corral list{store_flag}",
        style="dim",
        highlight=False,
    )
    # Its errors are part of the show: only interruption changes the exit code.
    # On a real endpoint they are not: it exits as `corral run` does.
    return EXIT_OK if code == EXIT_FAILED and base_url is None else code
