"""`RayExecutor`: run a benchmark's trials on Ray hosts while admission stays here."""

from __future__ import annotations

import os
import types
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio.to_thread

from .._checks import non_negative_int, positive_int
from .._errors import ConfigError
from ..store._protocol import CommitStore
from ._dispatch import RayExecution
from ._host import HostSpec
from ._logs import RayLog, plain
from ._owner import RayOwner, import_ray
from ._protocol import RunContext, Work
from ._stores import check_reach, check_store, spec_of

#: Actor options Corral sets itself: Corral's retries stay the only retries.
_OWN_OPTIONS = ("max_restarts", "max_task_retries", "max_concurrency")


class RayExecutor:
    """Runs trials on ``hosts`` long-lived Ray actors; admission stays in this process.

    ``address=None`` starts a local Ray (or uses the one this process already
    started); ``"auto"`` or ``"ray://..."`` joins a cluster. Each host runs up to
    ``trials_per_host`` trials and evaluations at once (None: as many as the run's
    limits admit). ``host_options`` go to each host actor (``num_cpus``, default 1;
    ``runtime_env``, ``resources``, ``scheduling_strategy``, ``enable_task_events``,
    default False, ...); ``init_options``
    to ``ray.init`` when this executor starts or joins Ray. Agents and environments
    are pickled (cloudpickle) once per host. ``max_host_restarts`` bounds how often
    a dead host is replaced in one run (default: ``2 * hosts``).

    ``connect_timeout`` bounds the wait for joining the cluster at ``address`` (or, with
    ``address=None``, the one ``RAY_ADDRESS`` names) (seconds; None: Ray's own, which
    retries an address nothing listens on for minutes).

    With ``log_file``, what Ray logs in this process goes to that file instead of the
    terminal, and hosts' output is not forwarded (it stays in Ray's session logs), from
    `connect` until `shutdown`. `shutdown` also stops the local Ray `connect` started.

    A run's named scopes live in one scope hub per `ConcurrencyScopes`: runs on Ray given
    the same registry share each scope's limit; one in this process cannot meanwhile.
    """

    #: Its hosts keep a run's named scopes in a scope hub (`keeps_scopes_elsewhere`).
    scopes_elsewhere = True

    def __init__(
        self,
        address: str | None = None,
        hosts: int = 1,
        trials_per_host: int | None = None,
        host_options: Mapping[str, Any] | None = None,
        *,
        init_options: Mapping[str, Any] | None = None,
        max_host_restarts: int | None = None,
        log_file: str | os.PathLike[str] | None = None,
        connect_timeout: float | None = 60.0,
    ) -> None:
        if address is not None and (not isinstance(address, str) or not address):
            raise ConfigError(f"address must be None, 'auto' or a Ray address, not {address!r}")
        self.address = address
        self.hosts = positive_int("hosts", hosts)
        self.trials_per_host = (
            None if trials_per_host is None else positive_int("trials_per_host", trials_per_host)
        )
        self.host_options = dict(_mapping("host_options", host_options))
        for name in _OWN_OPTIONS:
            if name in self.host_options:
                raise ConfigError(
                    f"host_options may not set {name!r}: Corral sets it (its retries are the "
                    "only retries)"
                )
        num_cpus = self.host_options.setdefault("num_cpus", 1)
        if isinstance(num_cpus, bool) or not isinstance(num_cpus, int | float) or num_cpus < 0:
            raise ConfigError(f"host_options['num_cpus'] must be a number >= 0, not {num_cpus!r}")
        self.init_options = dict(_mapping("init_options", init_options))
        if max_host_restarts is None:
            max_host_restarts = 2 * self.hosts
        self.max_host_restarts = non_negative_int("max_host_restarts", max_host_restarts)
        if log_file is not None and not isinstance(log_file, str | os.PathLike):
            raise ConfigError(f"log_file must be a path, not {log_file!r}")
        self._log = None if log_file is None else RayLog(Path(log_file))
        if connect_timeout is not None and (
            isinstance(connect_timeout, bool)
            or not isinstance(connect_timeout, int | float)
            or not connect_timeout > 0
        ):
            raise ConfigError(
                f"connect_timeout must be a positive number of seconds or None, "
                f"not {connect_timeout!r}"
            )
        self.connect_timeout = connect_timeout
        #: The thread `connect` starts or joins Ray from, until `shutdown`.
        self._owner = RayOwner()

    @property
    def log_file(self) -> Path | None:
        """Where Ray's logs go (None: where Ray sends them, the terminal)."""
        return None if self._log is None else self._log.path

    def __repr__(self) -> str:
        return (
            f"RayExecutor(address={self.address!r}, hosts={self.hosts}, "
            f"trials_per_host={self.trials_per_host})"
        )

    @property
    def capacity(self) -> int | None:
        """Trials and evaluations the hosts run at once (None: no bound of their own)."""
        return None if self.trials_per_host is None else self.hosts * self.trials_per_host

    async def prepare(self, work: Work, store: CommitStore) -> int | None:
        """Refuse (`ConfigError`) what hosts could not run, before anything runs or is
        written: objects that do not pickle, a store hosts cannot reach; then start or
        join Ray. Returns `capacity`."""
        self.check_picklable({"agent": work.agents, "environment": work.environments})
        check_store(store)  # before Ray starts: nothing to connect to for a store it cannot use
        all_local = await anyio.to_thread.run_sync(self.connect)
        check_reach(store, all_local=all_local)
        return self.capacity

    def start(self, run: RunContext) -> RayExecution:
        """The run's hosts-to-be, once the coordinator holds the benchmark's claim."""
        # Its scope hub is named as its hosts start (`RayExecution.start` takes the
        # registry's); its hosts are told apart there by the run's own id.
        store = spec_of(run.store, run.work.benchmark_id)
        spec = HostSpec(run.work, store, uuid.uuid4().hex)
        return RayExecution(
            spec,
            run,
            hosts=self.hosts,
            trials_per_host=self.trials_per_host,
            max_host_restarts=self.max_host_restarts,
            host_options=self.host_options,
        )

    def check_picklable(self, objects: Mapping[str, Mapping[str, Any]]) -> None:
        """`ConfigError` naming the first object that cannot be sent to a host."""
        ray = import_ray()
        for kind, named in objects.items():
            for name, obj in named.items():
                try:
                    ray.cloudpickle.dumps(obj)
                except Exception as exc:
                    raise ConfigError(
                        f"{kind} {name!r} ({obj!r}) cannot be pickled to run on Ray hosts: "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc

    def pickle_by_value(self, module: types.ModuleType) -> None:
        """Send ``module``'s code to the hosts with the objects that use it (for a module
        they cannot import, such as a file loaded by path); see also ``runtime_env``."""
        import_ray().cloudpickle.register_pickle_by_value(module)

    def connect(self) -> bool:
        """Start or join Ray (blocking); return whether every node is this machine.
        `ConfigError` if the cluster has too few CPUs for the hosts."""
        ray = import_ray()
        if not ray.is_initialized():
            options: dict[str, Any] = {"include_dashboard": False}
            if self._log is not None:
                self._log.start()
                options["log_to_driver"] = False
            options.update(self.init_options)
            # A local start takes as long as it takes; joining has a deadline (joining
            # the cluster RAY_ADDRESS names too: Ray reads it when no address is given).
            named = self.address or os.environ.get("RAY_ADDRESS") or None
            if named == "local":  # Ray starts a local instance for it, as for none
                named = None
            at = repr(named) if self.address or named is None else f"{named!r} (RAY_ADDRESS)"
            timeout = None if named is None else self.connect_timeout
            try:
                self._owner.init(ray, timeout, address=self.address, **options)
            except TimeoutError:
                raise ConfigError(
                    f"could not join the Ray cluster at {at} within "
                    f"{timeout:g} s (is it running? connect_timeout / --ray-timeout)"
                ) from None
            except Exception as exc:
                where = "start Ray" if named is None else f"join Ray at {at}"
                raise ConfigError(f"could not {where}: {type(exc).__name__}: {plain(exc)}") from exc
        cluster = ray.cluster_resources()
        need = self.hosts * float(self.host_options["num_cpus"])
        have = float(cluster.get("CPU", 0))
        if need > have:  # the hosts that do not fit would never start, nor their trials
            raise ConfigError(
                f"{self.hosts} hosts of num_cpus={self.host_options['num_cpus']} need {need:g} "
                f"CPUs; the Ray cluster has {have:g} (fewer hosts, or a smaller "
                "host_options['num_cpus'])"
            )
        for resource, each in _wanted(self.host_options).items():
            have = float(cluster.get(resource, 0))
            if each > have:  # no node can place even one host: it would never start
                raise ConfigError(
                    f"a host asks for {each:g} of resource {resource!r}; the Ray cluster has "
                    f"{have:g} (host_options)"
                )
        here = ray.util.get_node_ip_address()
        return all(n["NodeManagerAddress"] == here for n in ray.nodes() if n.get("Alive"))

    def shutdown(self) -> None:
        """Stop the local Ray `connect` started, once its processes have exited (Ray's
        exit hook does not wait: its agents would outlive this process by a minute);
        nothing if it joined one. Ray's logging goes back where it was."""
        self._owner.stop()
        if self._log is not None:
            self._log.stop()


def _wanted(options: Mapping[str, Any]) -> dict[str, float]:
    """The resources besides CPUs one host asks for (``num_gpus``, ``memory``,
    ``resources``), by Ray's name for them."""
    asked = [("GPU", options.get("num_gpus")), ("memory", options.get("memory"))]
    custom = options.get("resources")
    if isinstance(custom, Mapping):
        asked += [(str(resource), amount) for resource, amount in custom.items()]
    return {
        resource: float(amount)
        for resource, amount in asked
        if isinstance(amount, int | float) and not isinstance(amount, bool) and amount > 0
    }


def _mapping(name: str, value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise ConfigError(f"{name} must be a mapping of option name to value, not {value!r}")
    return value
