"""`Benchmark`: what a benchmark file defines for `corral run`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ._protocols import Agent, Environment
from ._run_config import RunConfig
from ._types import BenchmarkTaskMetadata


@dataclass(frozen=True, slots=True)
class Benchmark:
    """Tasks, agents and environments, plus defaults for ``run()`` arguments.

    ``run_defaults`` holds keyword arguments of `CorralRunner.run` (for example
    ``{"trials_per_task": 4, "k_values": (1, 2, 4)}``), or a `RunConfig`; the
    command line overrides them.
    """

    tasks: Mapping[str, BenchmarkTaskMetadata]
    agents: Mapping[str, Agent]
    environments: Mapping[str, Environment]
    run_defaults: Mapping[str, Any] | RunConfig = field(
        default_factory=lambda: MappingProxyType({})
    )
