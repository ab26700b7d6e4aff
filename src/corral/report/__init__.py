"""Reports: pass@k, per-task summaries, JSON."""

from ._build import build_report, is_finished, records_from
from ._errors import ErrorGroup
from ._model import BenchmarkReport, TaskReport
from ._passk import pass_at_k

__all__ = [
    "BenchmarkReport",
    "ErrorGroup",
    "TaskReport",
    "build_report",
    "is_finished",
    "pass_at_k",
    "records_from",
]
