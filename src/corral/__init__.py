"""Corral: run benchmarks of AI agents under exact concurrency limits, durably.

Every step of every trial is a durable commit, so a crash, a retry or a
cancelled run continues where it stopped; the report gives pass@k.
"""

from ._benchmark import Benchmark
from ._concurrency import ConcurrencyScopes, ScopeStatistics, concurrency
from ._errors import (
    BenchmarkBusyError,
    CommitConflictError,
    ConfigError,
    CorralError,
    ModelError,
    ModelUnavailable,
    NotSerializableError,
    RateLimited,
    StoreCorrupt,
    StoreError,
)
from ._protocols import Agent, Environment, Observer
from ._run_info import RunInfo
from ._runner import CorralRunner
from ._sandbox import SandboxResult, sandbox
from ._sources import TaskSource
from ._subprocess import SubprocessResult, subprocess
from ._tools import Tool
from ._types import (
    UNCHANGED,
    Action,
    BenchmarkTaskMetadata,
    Commit,
    Evaluation,
    Final,
    Step,
    ToolEffect,
    TrialKey,
    TrialRecord,
    TrialStatus,
    Usage,
)
from .executor import Executor, LocalExecutor, RayExecutor
from .report import (
    BenchmarkReport,
    Comparison,
    Estimate,
    Scores,
    TaskReport,
    compare,
    pass_at_k,
    pass_hat_k,
)
from .runtime import AgentSession, RetryPolicy
from .scheduler import Limits, Statistics
from .store import (
    CommitStore,
    MemoryStore,
    PostgresStore,
    SQLiteStore,
    copy_benchmarks,
    open_store,
)

__version__ = "0.1.0"

__all__ = [
    "UNCHANGED",
    "Action",
    "Agent",
    "AgentSession",
    "Benchmark",
    "BenchmarkBusyError",
    "BenchmarkReport",
    "BenchmarkTaskMetadata",
    "Commit",
    "CommitConflictError",
    "CommitStore",
    "Comparison",
    "ConcurrencyScopes",
    "ConfigError",
    "CorralError",
    "CorralRunner",
    "Environment",
    "Estimate",
    "Evaluation",
    "Executor",
    "Final",
    "Limits",
    "LocalExecutor",
    "MemoryStore",
    "ModelError",
    "ModelUnavailable",
    "NotSerializableError",
    "Observer",
    "PostgresStore",
    "RateLimited",
    "RayExecutor",
    "RetryPolicy",
    "RunInfo",
    "SQLiteStore",
    "SandboxResult",
    "ScopeStatistics",
    "Scores",
    "Statistics",
    "Step",
    "StoreCorrupt",
    "StoreError",
    "SubprocessResult",
    "TaskReport",
    "TaskSource",
    "Tool",
    "ToolEffect",
    "TrialKey",
    "TrialRecord",
    "TrialStatus",
    "Usage",
    "__version__",
    "compare",
    "concurrency",
    "copy_benchmarks",
    "open_store",
    "pass_at_k",
    "pass_hat_k",
    "sandbox",
    "subprocess",
]
