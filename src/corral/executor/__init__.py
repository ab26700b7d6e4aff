"""Running trials off the invoking process: `RayExecutor` (admission stays here)."""

from ._logs import default_log_file
from ._ray import RayExecutor
from ._setup import check_executor, remote_for

__all__ = ["RayExecutor", "check_executor", "default_log_file", "remote_for"]
