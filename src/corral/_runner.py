"""`CorralRunner`: validate everything, open the store, run the loop, build the report."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Unpack

import anyio.to_thread

from ._budget import Budget
from ._checks import flag, non_negative_int
from ._concurrency import ConcurrencyScopes, ScopeStatistics, given_max_subprocesses
from ._errors import ConfigError, unwrap_single
from ._history import no_benchmark
from ._ids import check_id
from ._metadata import check_metadata
from ._observers import Observers
from ._protocols import (
    Agent,
    Environment,
    Observer,
    check_agent,
    check_environment,
    check_observers,
)
from ._resources import run_contexts
from ._run_config import RunConfig, RunSettings, Timeouts
from ._run_info import RunInfo as RunInfo  # re-exported: its home before it moved
from ._run_meta import RunMeta, generation_of
from ._selection import select_samples
from ._sources import TaskSource
from ._suggest import did_you_mean
from ._tools import check_tools
from ._types import BenchmarkTaskMetadata
from .executor import Execution, Executor, LocalExecutor, Work
from .executor._protocol import keeps_scopes_elsewhere
from .history import StoredConfig
from .report import BenchmarkReport
from .report._build import PlanTasks
from .report._files import (
    check_not_overwriting,
    check_report_file,
    check_writable,
    report_file_failed,
    report_path,
    whole_report,
    write_report,
)
from .report._spool import RecordSpool
from .report._stored import stored_report
from .runtime._retry import RetryPolicy, exception_types
from .scheduler import KnownKeys, Limits, Resume, RunLoop, RunPlan, build_plan
from .scheduler._plan import across_models, check_models, scoring_plan
from .store import CommitStore, open_store
from .store._config_diff import first_difference
from .store._heads import TaskList
from .store._runs import RunRecord

DEFAULT_STORE = ".corral/store.db"
_EVALUATIONS_BY_ENVIRONMENT = "max_parallel_evaluations_by_environment"


class CorralRunner:
    """Runs benchmarks of agents in environments under concurrency limits.

    ``store`` is a `CommitStore` or an address for `open_store` (a path means
    SQLite). ``max_retries`` extra
    attempts follow an attempt that raises, after a backoff of
    U(0, min(backoff_cap, backoff_base * 2**n)) seconds; exceptions of the
    ``no_retry`` types end a trial at once. ``trial_timeout`` bounds one
    attempt's execution in seconds, ``evaluation_timeout`` one call of ``evaluate``
    (default: ``trial_timeout``). A rate limit waits at most ``max_rate_limit_wait``
    seconds at a time, and a trial still rate limited after ``max_deferrals`` waits
    ends ``error``. ``retry_policy`` replaces all of these.
    ``max_backlog`` bounds the appends handed to the store but not yet durable:
    past it, trials wait for the store to catch up (0: unbounded).
    ``models`` names the models a several-models run may use.
    """

    def __init__(
        self,
        tasks: Mapping[str, BenchmarkTaskMetadata],
        agents: Mapping[str, Agent],
        environments: Mapping[str, Environment],
        store: CommitStore | str | os.PathLike[str] = DEFAULT_STORE,
        max_retries: int = 2,
        trial_timeout: float | None = None,
        *,
        retry_policy: RetryPolicy | None = None,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
        no_retry: Sequence[type[BaseException]] = (),
        max_rate_limit_wait: float = 600.0,
        max_deferrals: int = 100,
        observers: Sequence[Observer] = (),
        models: Sequence[str] | None = None,
        evaluation_timeout: float | None = None,
        max_backlog: int = 1024,
        executor: Executor | None = None,
    ) -> None:
        for name, value in (("tasks", tasks), ("agents", agents), ("environments", environments)):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{name} must be a mapping of id to object, not {value!r}")
        if not isinstance(tasks, TaskSource):  # a source validated every line already
            for task_id, meta in tasks.items():
                if not isinstance(task_id, str) or not task_id:
                    raise ConfigError(f"task ids must be non-empty strings, not {task_id!r}")
                check_metadata(task_id, meta)
        for agent_id, agent in agents.items():
            check_agent(agent_id, agent)
        for env_id, env in environments.items():
            check_environment(env_id, env)
            declared = getattr(env, "tools", None)
            if declared is not None and not callable(declared):
                check_tools(declared, env_id)
        non_negative_int("max_backlog", max_backlog)
        #: Appends handed to the store and not yet durable before trials wait (0: no bound).
        self.max_backlog = max_backlog
        timeouts = Timeouts(trial_timeout, evaluation_timeout)  # checks both
        if retry_policy is None:
            retry_policy = RetryPolicy(
                max_retries=max_retries,
                backoff_base=backoff_base,
                backoff_cap=backoff_cap,
                no_retry=exception_types(no_retry),
                max_rate_limit_wait=max_rate_limit_wait,
                max_deferrals=max_deferrals,
            )
        elif not isinstance(retry_policy, RetryPolicy):
            raise ConfigError(f"retry_policy must be a RetryPolicy, not {retry_policy!r}")
        self.tasks = tasks
        self.agents = agents
        self.environments = environments
        self.store = _store(store)
        self.retry_policy = retry_policy
        self.trial_timeout = trial_timeout
        #: Seconds for one call of ``evaluate`` (default: ``trial_timeout``).
        self.evaluation_timeout = timeouts.evaluation_or_trial
        #: As given: None follows the trial_timeout a run sets.
        self._evaluation_timeout = evaluation_timeout
        self.observers = check_observers("observers", observers)
        #: The models a several-models run may name (None: any).
        self.models = None if models is None else check_models(models, None)
        self._models_of_tasks: frozenset[str] | None = None
        #: Where trials run: a `LocalExecutor` (this process), a `RayExecutor` (Ray hosts).
        self.executor = _check_executor(executor)

    @property
    def max_retries(self) -> int:
        return self.retry_policy.max_retries

    def _timeouts(self) -> Timeouts:
        """The runner's timeouts: an evaluation_timeout it was not given stays unset, so
        that of a run follows the run's trial_timeout."""
        return Timeouts(self.trial_timeout, self._evaluation_timeout)

    def _known_models(self, models: Sequence[str] | None) -> set[str]:
        """Every model a limit may name: the tasks' own, the runner's and the run's."""
        if self._models_of_tasks is None:
            tasks = self.tasks.skeletons() if isinstance(self.tasks, TaskSource) else self.tasks
            self._models_of_tasks = frozenset(
                meta.model for meta in tasks.values() if meta.model is not None
            )
        return {*self._models_of_tasks, *(self.models or ()), *(models or ())}

    def _work(
        self,
        benchmark_id: str,
        config: RunConfig,
        scopes: ConcurrencyScopes,
        *,
        observed: bool = False,
    ) -> Work:
        """What the run's executor runs every job with: the run's retry policy and
        timeouts where its config sets them, else the runner's; its bound on
        subprocesses, as its config or its ``scopes`` (the run's) gives it."""
        timeouts = config.timeouts or self._timeouts()
        return Work(
            benchmark_id=benchmark_id,
            agents=self.agents,
            environments=self.environments,
            policy=config.retry or self.retry_policy,
            trial_timeout=timeouts.trial,
            evaluation_timeout=timeouts.evaluation_or_trial,
            max_backlog=self.max_backlog,
            max_value_bytes=config.max_value_bytes,
            observed=observed,
            max_subprocesses=(
                given_max_subprocesses(scopes)
                if config.max_subprocesses is None
                else config.max_subprocesses
            ),
        )

    def _evaluation_keys(self, limits: Limits) -> set[str]:
        """What ``max_parallel_evaluations_by_environment`` may name: each environment's
        name, else its id (what keys its evaluations). The id of a named environment
        is refused here, naming its name: a cap on it would bound nothing."""
        keys = set(map(self._eval_key, self.environments))
        caps = limits.caps.get(_EVALUATIONS_BY_ENVIRONMENT, {})
        for key in caps:
            if key in self.environments and key not in keys:
                raise ConfigError(
                    f"{_EVALUATIONS_BY_ENVIRONMENT} names {key!r}, the id of an environment "
                    f"named {self._eval_key(key)!r}: its evaluations are keyed by "
                    f"{self._eval_key(key)!r}"
                )
        return keys

    def _eval_key(self, env_id: str) -> str:
        name = getattr(self.environments[env_id], "name", None)
        return name if isinstance(name, str) and name else env_id

    def _eval_keys(self, plan: RunPlan) -> tuple[str, ...]:
        """Each task's `_eval_key`, asked once per environment (a run of 40,000 tasks
        has a few)."""
        envs = [meta.environment_id for meta in plan.lights()]
        keys = {env_id: self._eval_key(env_id) for env_id in dict.fromkeys(envs)}
        return tuple(map(keys.__getitem__, envs))

    def prepare(
        self,
        task_ids: Sequence[str] | None = None,
        trials_per_task: int = 1,
        k_values: Sequence[int] = (1,),
        include_dependencies: bool = True,
        models: Sequence[str] | None = None,
    ) -> tuple[RunPlan, tuple[int, ...]]:
        """Validate a selection; raise `ConfigError` for anything `run` would refuse."""
        config = RunConfig.of(
            task_ids=task_ids,
            trials_per_task=trials_per_task,
            k_values=k_values,
            include_dependencies=include_dependencies,
            models=models,
        )
        return self._plan(config, config.task_ids), config.k_values

    def _plan(self, config: RunConfig, task_ids: Sequence[str] | None) -> RunPlan:
        """The plan of ``task_ids`` (``config``'s selection), checked against this
        runner's tasks."""
        plan = build_plan(
            self.tasks,
            task_ids,
            include_dependencies=config.include_dependencies,
            trials_per_task=config.trials_per_task,
        )
        if config.models is not None:
            plan = across_models(plan, check_models(config.models, self.models))
        for task_id, meta in zip(plan.task_ids, plan.lights(), strict=True):
            if meta.agent_id not in self.agents:
                raise ConfigError(
                    f"task {task_id!r} names unknown agent {meta.agent_id!r}"
                    + did_you_mean(meta.agent_id, self.agents)
                )
            if meta.environment_id not in self.environments:
                raise ConfigError(
                    f"task {task_id!r} names unknown environment {meta.environment_id!r}"
                    + did_you_mean(meta.environment_id, self.environments)
                )
        return plan

    def config(self, config: RunConfig | None = None, **settings: Unpack[RunSettings]) -> RunConfig:
        """What `run` runs with: ``config`` (default: `RunConfig()`) with ``settings``
        (`run`'s flat keywords) changed, and the runner's retry policy and timeouts
        where it sets none. A `ConfigError` names a bad value."""
        if config is None:
            config = RunConfig()
        elif not isinstance(config, RunConfig):
            raise ConfigError(f"config must be a RunConfig, not {config!r}")
        if config.retry is None:
            config = dataclasses.replace(config, retry=self.retry_policy)
        if config.timeouts is None:
            config = dataclasses.replace(config, timeouts=self._timeouts())
        return config.updated(**settings)

    async def run(
        self,
        benchmark_id: str,
        config: RunConfig | Sequence[str] | None = None,
        *,
        observers: Sequence[Observer] = (),
        scopes: ConcurrencyScopes | None = None,
        executor: Executor | None = None,
        tags: Sequence[str] = (),
        note: str | None = None,
        source: str | os.PathLike[str] | None = None,
        **settings: Unpack[RunSettings],
    ) -> BenchmarkReport:
        """Run (or resume) ``benchmark_id`` with ``config`` (a `RunConfig`) and return
        its report.

        ``settings`` are the config's settings as flat keywords (``trials_per_task=4,
        max_parallel=8``): each one given replaces that setting of ``config`` (see
        `RunConfig.updated`), so ``run(id, base, trials_per_task=8)`` runs ``base``
        with 8 trials. A retry or timeout setting the config leaves unset is the
        runner's.

        A later run of the same id may select a subset of its tasks (the report
        covers those), and ``rerun`` gives the trials that ended with these
        statuses (``"error"``, ``"timeout"``, ``"max_iterations"``,
        ``"unreachable"``, ``"limit"``) a fresh attempt: a ``reopen`` commit marks it, the
        earlier attempt stays in the history, the report uses the latest, and
        unreachable descendants of reopened trials run again.
        ``fail_on_error`` (a count, or a fraction of the run's trials below 1)
        stops admitting trials once more trial errors and failed evaluations than
        that happened in this run; what runs finishes, and the report is then
        incomplete (``report.stopped`` says why) and the benchmark resumable.

        Everything is validated first: bad input raises `ConfigError` before any
        trial starts and before anything is written to the store. ``order`` picks
        among ready trials: ``"critical_path"`` (the longest remaining dependency
        chain first, then the scarcest model or environment limit, then lower
        rounds, then task order) or ``"fifo"`` (rounds,
        then task order). ``models`` runs every selected task once per model, as
        ``task@model``, concurrently; ``max_parallel_by_model`` bounds each model
        and the report gives pass@k per model (``BenchmarkReport.by_model``).
        ``scopes`` (default: a fresh `ConcurrencyScopes` per run) holds the run's
        named `concurrency` scopes and its `subprocess` bound, ``max_subprocesses``
        (default: the CPUs this process may use); pass one registry to several
        runs to share them.

        ``token_limit`` (input + output tokens), ``cost_limit`` (cost as recorded
        with ``record_usage``) and ``working_time_limit`` (seconds spent working:
        not queued, deferred by a rate limit or in a retry's backoff) are every
        trial's budgets; a task's metadata may set its own, which win. A trial
        that overruns one ends ``limit``: it is scored but never counts as passed.
        ``run_cost_limit`` stops admitting trials once the cost recorded by every
        run of ``benchmark_id`` reaches it (``report.stopped`` says so); a later
        run with a higher limit continues. Budgets may change between runs.
        ``executor`` (default: the runner's, a `LocalExecutor`) is where the admitted
        trials run: any `Executor`, such as a `RayExecutor` on Ray hosts; admission
        stays here.
        ``max_value_bytes`` (default 4 MiB) is the most bytes of JSON one recorded
        value (a state, an observation, arguments, an output, evaluation details)
        may take: a larger one fails its attempt (or evaluation) with a
        `NotSerializableError` naming its size, and nothing of it is stored.

        The store keeps what the report needs beyond the trials (the run's selection
        and the tasks the dependency closure added, the trials it reused, its
        budgets, k values, timings and why it stopped), so ``corral report`` gives it
        on every backend. ``report_file`` (default: ``reports/ID.json`` beside an
        SQLite store, none otherwise) is where the report of the whole benchmark is
        also written as JSON.

        ``tags`` (labels to find the run by: ``corral list --tag``) and ``note`` (free
        text) are recorded with the run, with Corral's version and, for ``source``
        (the benchmark's file), its path and git commit; the report gives them.

        ``sample_ids`` runs the tasks of these ids (as ``task_ids`` does);
        ``shuffle`` draws them in an order fixed by ``seed`` (default 0), and
        ``limit`` keeps the first N: ``limit=50, shuffle=True, seed=1`` is the same
        50 tasks in every run (dependencies added as for ``task_ids``).

        The second argument may also be the task ids, as SPEC's signature has it:
        ``run(id, ["a", "b"])`` is ``run(id, task_ids=["a", "b"])``.
        """
        _check_benchmark_id(benchmark_id)
        observers = check_observers("observers", observers)
        config, settings = _positional_task_ids(config, settings)
        config = self.config(config, **settings)
        check_not_overwriting(config.report_file, self.store, source)
        check_writable(self._report_path(config.report_file, benchmark_id))
        task_ids = select_samples(
            self.tasks,
            config.task_ids,
            limit=config.limit,
            shuffle=config.shuffle,
            seed=config.seed,
            sample_ids=config.sample_ids,
        )
        plan = self._plan(config, task_ids)
        generation = generation_of(self.agents, plan.lights())
        meta = replace(RunMeta.of(tags, note, source), generation=generation)
        limits = config.limits
        limits.check_keys(
            KnownKeys(
                models=self._known_models(config.models),
                environment_ids=self.environments.keys(),
                evaluation_keys=self._evaluation_keys(limits),
            )
        )
        scopes = _check_scopes(scopes, config.max_subprocesses)
        executor = self.executor if executor is None else _check_executor(executor)
        observed = bool(self.observers or observers) or config.stop.run_cost_limit is not None
        work = self._work(benchmark_id, config, scopes, observed=observed)
        with scopes.running(elsewhere=keeps_scopes_elsewhere(executor)):
            config = await self._prepared(executor, work, config)
            resume = Resume(plan, rerun=config.rerun)
            return await self._run(
                benchmark_id,
                plan,
                config,
                scopes,
                observers,
                resume,
                executor=executor,
                work=work,
                meta=meta,
            )

    async def rescore(
        self,
        benchmark_id: str,
        task_ids: Sequence[str] | None = None,
        *,
        failed_only: bool = False,
        k_values: Sequence[int] = (1,),
        max_parallel_evaluations: int = 4,
        max_parallel_evaluations_by_environment: Mapping[str, int] | None = None,
        observers: Sequence[Observer] = (),
        scopes: ConcurrencyScopes | None = None,
        report_file: str | os.PathLike[str] | None = None,
        tags: Sequence[str] = (),
        note: str | None = None,
    ) -> BenchmarkReport:
        """Evaluate the finished trials of ``benchmark_id`` again with the current
        environments' ``evaluate`` and return the report of the rescored tasks.

        Each new score is appended as an evaluation commit (the report uses the
        latest); nothing else runs and nothing is deleted. ``task_ids`` limits it to
        some tasks (ids as recorded, ``task@model`` in a several-models run);
        ``failed_only`` to trials that did not pass (or whose scoring failed).
        A changed scorer is not a changed configuration: the stored one is used.
        ``report_file``, ``tags`` and ``note`` as for `run`.
        """
        _check_benchmark_id(benchmark_id)
        check_report_file(report_file)
        meta = RunMeta.of(tags, note, None)
        observers = check_observers("observers", observers)
        flag("failed_only", failed_only)
        scopes = _check_scopes(scopes, None)
        limits = Limits.resolve(
            max_parallel_evaluations=max_parallel_evaluations,
            max_parallel_evaluations_by_environment=max_parallel_evaluations_by_environment,
        )
        async with self.store.opened():
            config = await self.store.benchmark_config(benchmark_id)
            if config is None:
                raise await no_benchmark(self.store, benchmark_id)
        plan = scoring_plan(benchmark_id, config, task_ids, self.tasks)
        self._check_same_tasks(benchmark_id, config, plan)
        settings = self.config(
            dataclasses.replace(RunConfig(order="fifo"), limits=limits),
            trials_per_task=plan.trials_per_task,
            k_values=k_values,
            report_file=report_file,
        )
        check_not_overwriting(settings.report_file, self.store)
        check_writable(self._report_path(settings.report_file, benchmark_id))
        limits.check_keys(KnownKeys(evaluation_keys=self._evaluation_keys(limits)))
        # Scored where the runner's runs score (on Ray hosts: a scorer may need them).
        observed = bool(self.observers or observers)
        work = self._work(benchmark_id, settings, scopes, observed=observed)
        with scopes.running(elsewhere=keeps_scopes_elsewhere(self.executor)):
            settings = await self._prepared(self.executor, work, settings)
            resume = Resume(plan, rescore="failed" if failed_only else "all")
            return await self._run(
                benchmark_id,
                plan,
                settings,
                scopes,
                observers,
                resume,
                executor=self.executor,
                work=work,
                meta=meta,
            )

    def _report_path(self, report_file: Path | None, benchmark_id: str) -> Path | None:
        """Where a run writes its report: ``report_file``, else beside a file store whose
        folder exists (a folder that does not is the store's to make, or to refuse,
        naming the store rather than a report it would hold)."""
        if report_file is not None:
            return report_file
        path = report_path(self.store, benchmark_id)
        return path if path is not None and os.path.isdir(path.parent.parent) else None

    async def _prepared(self, executor: Executor, work: Work, config: RunConfig) -> RunConfig:
        """``config`` once ``executor`` is ready to run ``work`` (it refuses what it cannot
        run before anything is written), its jobs at once capped at what it can run."""
        capacity = await executor.prepare(work, self.store)
        if capacity is not None and capacity < config.limits.max_parallel_total:
            limits = dataclasses.replace(config.limits, max_parallel_total=capacity)
            config = dataclasses.replace(config, limits=limits)
        return config

    def _check_same_tasks(
        self, benchmark_id: str, config: Mapping[str, Any], plan: RunPlan
    ) -> None:
        """Refuse to rescore with tasks, agents or environments other than those stored
        (another benchmark's file, say): only the scorer may change."""
        refusal = (
            f"benchmark {benchmark_id!r} did not run with these tasks "
            "({}): rescore it with the file it ran with; only the scorer may change"
        )
        stored = StoredConfig.decode(config)
        trials = stored.trials_per_task
        task_ids = plan.task_ids
        bases: dict[str, None] = {}
        models = set()
        for t, task_id in enumerate(task_ids):
            # As the file writes it, by the task's stored model (not the id's last "@":
            # a model's name may hold one): ``q`` for ``q@claude@2024``.
            base, model = plan.output_name(t), stored.tasks[task_id].model
            if base not in self.tasks:
                hint = did_you_mean(task_id, self.tasks)
                raise ConfigError(refusal.format(f"this file has no task {task_id!r}{hint}"))
            bases[base] = None
            if base != task_id and model is not None:  # a several-models run
                models.add(model)
        again, _ = self.prepare(list(bases), trials, models=sorted(models) or None)
        now = StoredConfig.decode(again.config())
        before = {"trials_per_task": trials, "tasks": {t: stored.entry(t) for t in task_ids}}
        after = {
            "trials_per_task": trials,
            "tasks": {t: now.entry(t) if t in now.tasks else {} for t in task_ids},
        }
        if before != after:
            raise ConfigError(refusal.format(first_difference(before, after)))

    async def _run(
        self,
        benchmark_id: str,
        plan: RunPlan,
        config: RunConfig,
        scopes: ConcurrencyScopes,
        observers: Sequence[Observer],
        resume: Resume,
        *,
        executor: Executor | None = None,
        work: Work | None = None,
        meta: RunMeta | None = None,
    ) -> BenchmarkReport:
        limits, ks, budget = config.limits, config.k_values, config.budget
        run_cost_limit = config.stop.run_cost_limit
        error_budget = config.stop.error_budget(len(plan.task_ids) * plan.trials_per_task)
        report_file = config.report_file
        path = report_file or report_path(self.store, benchmark_id)
        # The report file's records, kept as the trials finish; not for a rescore, whose
        # records carry each trial's earlier usage (`RecordSpool`).
        spool = (
            None
            if path is None or resume.rescoring
            else RecordSpool(plan.task_ids, plan.trials_per_task, path.parent)
        )
        # The one folding of errors: a failure every task heard is raised once.
        with (
            unwrap_single(),
            scopes.active(),  # the run's named scopes, for its agents
            contextlib.nullcontext() if spool is None else contextlib.closing(spool),
        ):
            watchers = [*self.observers, *observers]
            notify = Observers(watchers)
            started = time.time()
            kind = "rescore" if resume.rescoring else "run"
            meta = meta or RunMeta()
            # Only a benchmark file asks git (in a thread): without one nothing blocks, and
            # a run starts without a thread hop (tests wait for all tasks to block).
            meta = await anyio.to_thread.run_sync(meta.read) if meta.provenance else meta.read()
            eval_keys = self._eval_keys(plan)
            async with self.store.opened(), self.store.claim(benchmark_id):
                # A rescore keeps the stored configuration; a run registers its own.
                existed = resume.rescoring or await self.store.register_benchmark(
                    benchmark_id, plan.stored_config()
                )
                if existed:
                    async for chunk in self.store.scan(benchmark_id):
                        resume.absorb(chunk)
                marks = plan.added
                if resume.rescoring:  # no closure: the tasks keep the last run's marks
                    runs = await self.store.runs(benchmark_id)
                    marks = frozenset(runs[-1].added if runs else ())
                resume.settle()  # a rerun's reopen marker is written as its trial starts
                loop = RunLoop(
                    plan=plan,
                    limits=limits,
                    eval_keys=list(eval_keys),
                    work=work or self._work(benchmark_id, config, scopes),
                    store=self.store,
                    executor=executor or LocalExecutor(),
                    notify=notify if watchers else None,  # no call per commit for nobody
                    resume=resume,
                    critical_path=config.order == "critical_path",
                    error_budget=error_budget,
                    budget=budget,
                    run_cost_limit=run_cost_limit,
                    spool=spool,
                    scopes=scopes,
                )
                del resume
                info = RunInfo(
                    benchmark_id,
                    plan,
                    limits,
                    eval_keys,
                    loop.statistics,
                    loop.resumed,
                    _with_hosts(scopes, loop.execution),
                    loop.records.values(),
                    _budgets(budget, run_cost_limit),
                    loop.recorded_cost,
                )
                used = _used(self.agents, self.environments, plan)
                async with run_contexts(used, info):  # a model client's pool, say
                    notify.drop(_call(watchers, "on_run_start", info))  # logged and dropped
                    loop.records.clear()  # the earlier runs' records: read by now
                    try:
                        await loop.run()
                    finally:
                        _call(watchers, "on_run_end", info)
                ran = time.time()
                # From the trial heads the store kept as the commits landed (every commit
                # this run handed over is durable by now): the report holds no record,
                # each task's read from the store when used (the run kept none). No
                # configuration dict per task: the plan's metadata is enough. The loop's
                # own state goes first.
                resumed, stopped = loop.resumed, loop.stopped
                del loop, info
                report = await stored_report(
                    self.store,
                    benchmark_id,
                    TaskList(plan.trials_per_task, PlanTasks(plan.task_ids, plan.lights())),
                    k_values=ks,
                    added=marks,
                    resumed=resumed,
                    timings={"run_seconds": ran - started},
                    stopped=stopped,
                    budgets=_budgets(budget, run_cost_limit),
                )
                report = replace(
                    report,
                    # What building the report took (its heads read and tallied).
                    timings={**report.timings, "report_seconds": time.time() - ran},
                    tags=meta.tags,
                    note=meta.note,
                    provenance=dict(meta.provenance),
                    generation={agent: dict(s) for agent, s in meta.generation.items()},
                )
                record = _run_record(kind, started, plan, marks, report)
                await self.store.record_run(benchmark_id, record)
                # A benchmark this run registered has the plan's tasks, no others.
                whole = (
                    report
                    if path is None or not existed
                    else await whole_report(self.store, record, report)
                )
            if path is not None:
                try:
                    write_report(path, whole, spool)
                except OSError as exc:
                    raise report_file_failed(path, self.store, whole, exc) from exc
            del whole
            return report


def _check_executor(executor: object) -> Executor:
    if executor is None:
        return LocalExecutor()
    if not isinstance(executor, Executor):
        raise ConfigError(
            f"executor must be an Executor (a LocalExecutor, a RayExecutor) or None, "
            f"not {executor!r}"
        )
    return executor


def _check_scopes(scopes: object, max_subprocesses: int | None) -> ConcurrencyScopes:
    """The run's registry: ``scopes`` (a `ConcurrencyScopes` whose bound is not another
    than ``max_subprocesses``), else a fresh one bounded by ``max_subprocesses``."""
    if scopes is None:
        return ConcurrencyScopes(max_subprocesses=max_subprocesses)
    if not isinstance(scopes, ConcurrencyScopes):
        raise ConfigError(f"scopes must be a ConcurrencyScopes, not {scopes!r}")
    if max_subprocesses is not None and max_subprocesses != scopes.max_subprocesses:
        raise ConfigError(
            f"max_subprocesses={max_subprocesses!r} differs from the given scopes' "
            f"{scopes.max_subprocesses}"
        )
    return scopes


def _run_record(
    kind: str, started: float, plan: RunPlan, marks: frozenset[str], report: BenchmarkReport
) -> RunRecord:
    """What the store keeps of this run for its report (`RunRecord`)."""
    return RunRecord(
        kind=kind,
        started=started,
        ended=time.time(),
        task_ids=tuple(plan.task_ids),
        added=tuple(sorted(marks)),
        resumed=report.resumed,
        k_values=report.k_values,
        budgets=report.budgets,
        stopped=report.stopped,
        timings=report.timings,
        counts=report.counts,
        span=(report.started_at, report.finished_at),
        tags=report.tags,
        note=report.note,
        provenance=report.provenance,
        generation=report.generation,
    )


def _with_hosts(
    scopes: ConcurrencyScopes, execution: Execution
) -> Callable[[], Mapping[str, ScopeStatistics]]:
    """The run's scopes: this process's, and the named scopes its executor's workers
    share elsewhere (Ray hosts)."""

    def statistics() -> Mapping[str, ScopeStatistics]:
        return {**scopes.statistics(), **execution.scope_statistics()}

    return statistics


def _budgets(budget: Budget, run_cost_limit: float | None) -> dict[str, float]:
    """The run-wide budgets a report shows (a task's own are in its trials' records)."""
    out: dict[str, float] = budget.to_dict()
    if run_cost_limit is not None:
        out["run_cost_limit"] = run_cost_limit
    return out


def _used(
    agents: Mapping[str, Agent], environments: Mapping[str, Environment], plan: RunPlan
) -> list[object]:
    """The agents and environments the plan's tasks name, in task order."""
    agent_ids: dict[str, None] = {}
    env_ids: dict[str, None] = {}
    for meta in plan.lights():
        agent_ids[meta.agent_id] = None
        env_ids[meta.environment_id] = None
    return [
        *(agents[a] for a in agent_ids if a in agents),
        *(environments[e] for e in env_ids if e in environments),
    ]


def _check_benchmark_id(benchmark_id: object) -> None:
    check_id("benchmark_id", benchmark_id)


def _positional_task_ids(
    config: RunConfig | Sequence[str] | None, settings: RunSettings
) -> tuple[RunConfig | None, RunSettings]:
    """``run``'s second argument as SPEC section 1 writes it, ``task_ids``, or as
    section 5 does, a `RunConfig`: task ids go into ``settings`` (given there as well,
    a `ConfigError` names both); anything else is a `ConfigError` naming it."""
    if config is None or isinstance(config, RunConfig):
        return config, settings
    if isinstance(config, str | bytes) or not isinstance(config, Sequence):
        # Neither: said as SPEC's signature has it ("x" for ["x"], say, or settings
        # meant as keywords).
        raise ConfigError(
            f"run's second argument must be task ids (a sequence of str) or a RunConfig, "
            f"not {config!r}"
        )
    if "task_ids" in settings:
        raise ConfigError(
            f"task_ids given twice: {list(config)!r} as the second argument and "
            f"task_ids={settings['task_ids']!r}"
        )
    return None, {**settings, "task_ids": config}


def _call(watchers: Sequence[Observer], hook: str, info: RunInfo) -> list[Observer]:
    """Call ``hook`` of every watcher that has it; return those that raised (logged)."""
    failed = []
    for watcher in watchers:
        method = getattr(watcher, hook, None)
        if method is None:
            continue
        try:
            method(info)
        except Exception:  # an observer never stops the run
            logging.getLogger("corral").warning(
                "observer %r failed in %s", watcher, hook, exc_info=True
            )
            failed.append(watcher)
    return failed


def _store(store: CommitStore | str | os.PathLike[str]) -> CommitStore:
    if isinstance(store, str | os.PathLike):
        return open_store(store)
    if not isinstance(store, CommitStore):
        raise ConfigError(f"store must be a path or a CommitStore, not {store!r}")
    return store
