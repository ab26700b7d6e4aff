"""Reports: pass@k, per-task summaries, JSON."""

from ._build import build_report, records_from
from ._model import BenchmarkReport, TaskReport
from ._passk import pass_at_k

__all__ = ["BenchmarkReport", "TaskReport", "build_report", "pass_at_k", "records_from"]
