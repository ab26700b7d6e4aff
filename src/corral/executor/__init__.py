"""Where admitted trials run: the `Executor` seam, `LocalExecutor` (worker tasks of this
process, the default) and `RayExecutor` (Ray hosts; admission stays here)."""

from ._local import LocalExecutor
from ._logs import default_log_file
from ._protocol import Execution, Executor, RunContext, Work
from ._ray import RayExecutor

__all__ = [
    "Execution",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "RunContext",
    "Work",
    "default_log_file",
]
