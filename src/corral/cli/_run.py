"""``corral run`` and ``corral demo``: run a benchmark, show progress, print pass@k."""

from __future__ import annotations

import contextlib
import importlib.util
import shlex
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import click
from rich.text import Text

from .._benchmark import Benchmark
from .._errors import ConfigError, CorralError
from .._run_config import RunConfig, Timeouts
from .._runner import DEFAULT_STORE, CorralRunner
from ..demo import PROVIDERS, build_demo, check_endpoint, demo_retry_policy, demo_server
from ..executor import RayExecutor, default_log_file
from ..report._passk import default_ks
from ..runtime import RetryPolicy
from ..store import CommitStore
from ..store._open import shown_address
from ._execute import EXIT_FAILED, EXIT_OK, make_console, run_benchmark
from ._load import benchmark_module, load_benchmark, split_target
from ._options import durability_option, open_store, store_option
from ._progress import Progress, progress_choice, progress_option
from ._run_flags import RETRY, flag_settings, run_config, run_extras, run_flags, runner_defaults


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


def executor_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--executor`` and the Ray options (`corral run`, `corral rescore`)."""
    for option in (
        click.option("-v", "--verbose", is_flag=True, help="Say where Ray's own logs go."),
        click.option(
            "--ray-timeout",
            type=float,
            help="Seconds to wait for joining --ray-address (default 60).",
        ),
        click.option("--hosts", type=int, help="Ray hosts (actors) that run trials (default 1)."),
        click.option(
            "--ray-address", help="Ray cluster to join ('auto', ray://...; default: start one)."
        ),
        click.option(
            "--executor",
            type=click.Choice(["local", "ray"]),
            default="local",
            show_default=True,
            help="Where trials (and scorers) run: in this process, or on Ray hosts "
            "(admission stays here).",
        ),
    ):
        command = option(command)
    return command


@click.command("run")
@click.argument("target", metavar="FILE[:OBJECT]")
@click.option(
    "--benchmark-id",
    help="Id to record under (default: the file's stem, or the module's last name).",
)
@store_option
@run_flags()
@durability_option
@progress_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@executor_options
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
    durability: str,
    progress: str | None,
    no_progress: bool,
    as_json: bool,
    executor: str,
    ray_address: str | None,
    hosts: int | None,
    ray_timeout: float | None,
    verbose: bool,
    base_url: str | None,
    run_tags: tuple[str, ...],
    note: str | None,
    **flags: Any,
) -> int:
    """Run (or resume) the benchmark that FILE defines.

    FILE may also be a module name (corral.benchmarks.humaneval). OBJECT
    (default: benchmark) is a corral.Benchmark, or a function returning one
    (given --base-url, if set). Its run_defaults are the defaults of these flags;
    NAME=N limits are merged into them. Running again with the same
    --benchmark-id resumes.
    """
    shown = progress_choice(progress, no_progress)
    settings = flag_settings(flags)
    with _executor(executor, ray_address, hosts, ray_timeout, verbose=verbose) as ray:
        benchmark, path = _loaded(target, ray, base_url)
        config = run_config(benchmark.run_defaults, settings)
        runner = _runner(benchmark, open_store(store, durability), executor=ray)
        return run_benchmark(
            make_console(),
            runner,
            _default_id(target, path) if benchmark_id is None else benchmark_id,
            {
                "config": config,
                **run_extras(benchmark.run_defaults, {"tags": run_tags or None, "note": note}),
                "source": path,
            },
            progress=shown,
            as_json=as_json,
            store=store,
        )


@contextlib.contextmanager
def _executor(
    kind: str, address: str | None, hosts: int | None, timeout: float | None, *, verbose: bool
) -> Iterator[RayExecutor | None]:
    """The executor the flags ask for (None: this process); the local Ray it started
    is gone before the command exits."""
    if kind != "ray":
        flags = (("--ray-address", address), ("--hosts", hosts), ("--ray-timeout", timeout))
        for flag, value in flags:
            if value is not None:
                raise ConfigError(f"{flag} {value} needs --executor ray")
        yield None
        return
    # Ray's own logs go to a file, not over the live display.
    ray = RayExecutor(
        address,
        1 if hosts is None else hosts,
        log_file=default_log_file(),
        connect_timeout=60.0 if timeout is None else timeout,
    )
    if verbose:
        click.echo(f"Ray's logs: {ray.log_file}", err=True)
    try:
        yield ray
    finally:
        ray.shutdown()


def _loaded(
    target: str, ray: RayExecutor | None, base_url: str | None = None
) -> tuple[Benchmark, Path]:
    """The benchmark ``target`` names; on Ray, its file's code travels to the hosts
    (they cannot import the file by its name)."""
    benchmark, path = load_benchmark(target, base_url)
    if ray is not None:
        # A file is imported under a name of its own; a module by its name.
        where, _ = split_target(target)
        ray.pickle_by_value(sys.modules[benchmark_module(path) if where.is_file() else str(where)])
    return benchmark, path


def _default_id(target: str, path: Path) -> str:
    """The id a run records under without --benchmark-id: the file's stem; for a module
    given by name, its last part (a package's own name, not ``__init__``)."""
    where, _ = split_target(target)
    return path.stem if where.is_file() else str(where).rpartition(".")[2]


def _runner(benchmark: Benchmark, store: CommitStore, **kwargs: Any) -> CorralRunner:
    return CorralRunner(
        benchmark.tasks, benchmark.agents, benchmark.environments, store=store, **kwargs
    )


@click.command("rescore")
@click.argument("benchmark_id")
@click.argument("target", metavar="FILE[:OBJECT]")
@store_option
@run_flags("task_ids", help={"task_ids": "Rescore only this task (repeatable)."})
@click.option("--failed-only", is_flag=True, help="Only trials that did not pass.")
@run_flags(
    "k_values",
    "max_parallel_evaluations",
    "max_parallel_evaluations_by_environment",
    "max_retries",
    "evaluation_timeout",
    help={
        "max_parallel_evaluations": "Evaluations at once (default 4).",
        "max_parallel_evaluations_by_environment": "Evaluations in one environment (repeatable).",
        "max_retries": "Extra attempts after evaluate raises (default: FILE's run_defaults, "
        f"else {RETRY.max_retries}).",
        "evaluation_timeout": "Seconds for one call of evaluate (default: FILE's run_defaults' "
        "evaluation_timeout or trial_timeout, else none).",
    },
)
@durability_option
@progress_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@executor_options
@tag_options
def rescore_command(
    benchmark_id: str,
    target: str,
    store: str,
    failed_only: bool,
    durability: str,
    progress: str | None,
    no_progress: bool,
    as_json: bool,
    executor: str,
    ray_address: str | None,
    hosts: int | None,
    ray_timeout: float | None,
    verbose: bool,
    run_tags: tuple[str, ...],
    note: str | None,
    **flags: Any,
) -> int:
    """Score BENCHMARK_ID's finished trials again with the scorers FILE defines now.

    Each new score is a new evaluation commit; the report uses the latest and
    the earlier ones stay in the history (corral show). Nothing else runs, and
    a changed scorer is not a changed configuration. Prints the report of the
    rescored tasks; exit codes as for corral run.
    """
    shown = progress_choice(progress, no_progress)
    given = flag_settings(flags)
    with _executor(executor, ray_address, hosts, ray_timeout, verbose=verbose) as ray:
        benchmark, _ = _loaded(target, ray)
        defaults = benchmark.run_defaults
        runner_settings = {
            k: given.pop(k) for k in ("max_retries", "evaluation_timeout") if k in given
        }
        config = runner_defaults(defaults).updated(**runner_settings)
        timeouts = config.timeouts or Timeouts()
        runner = _runner(
            benchmark,
            open_store(store, durability, create=False),
            retry_policy=config.retry,
            trial_timeout=timeouts.trial,
            evaluation_timeout=timeouts.evaluation,
            executor=ray,
        )
        wanted = defaults.k_values if isinstance(defaults, RunConfig) else defaults.get("k_values")
        ks = given.pop("k_values", ())
        settings = {
            **given,
            "failed_only": failed_only,
            "k_values": _rescore_ks(runner.store, benchmark_id, ks, wanted),
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
            store=store,
        )


def _rescore_ks(
    store: CommitStore, benchmark_id: str, given: tuple[int, ...], wanted: Any
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
    config = run_config(benchmark.run_defaults, {})
    models = sorted({m.model for m in benchmark.tasks.values() if m.model})
    console = make_console()
    console.print(  # the id as written: any id is valid, "[/]" and "[red]" too
        Text.assemble(
            ("corral demo", "bold cyan"),
            f": {len(benchmark.tasks)} tasks x {config.trials_per_task} trials on "
            f"{', '.join(models)} in {', '.join(benchmark.environments)}; benchmark id ",
            (benchmark_id, "bold"),
        ),
        highlight=False,
    )
    where = f"the models at {base_url}"
    if base_url is None:
        where = "scripted models on 127.0.0.1 (--base-url URL --model NAME for a real one)"
    if provider == "anthropic":
        where += " over Anthropic's Messages API"
    console.print(f"ToolAgent with {where}", style="dim", highlight=False)
    code = run_benchmark(
        console, runner, benchmark_id, {"config": config}, progress=progress, store=store
    )
    # Commands to copy: quoted as a shell reads them back.
    store_flag = "" if store == DEFAULT_STORE else f" --store {shlex.quote(shown_address(store))}"
    quoted = shlex.quote(benchmark_id)
    console.print(
        f"next: corral show {quoted} bid-build 0{store_flag}  ·  "
        f"corral report {quoted}{store_flag}  ·  corral list{store_flag}",
        style="dim",
        highlight=False,
    )
    # Its errors are part of the show: only interruption changes the exit code.
    # On a real endpoint they are not: it exits as `corral run` does.
    return EXIT_OK if code == EXIT_FAILED and base_url is None else code
