"""Reports: pass@k and pass^k with confidence intervals, per-task summaries, comparisons, JSON."""

from ._build import build_report, is_finished, records_from
from ._compare import Comparison, compare
from ._errors import ErrorGroup
from ._model import BenchmarkReport
from ._named import NamedScore, named_scores
from ._passk import pass_at_k, pass_hat_k
from ._scores import Estimate, Scores, task_scores
from ._tasks import TaskReport

__all__ = [
    "BenchmarkReport",
    "Comparison",
    "ErrorGroup",
    "Estimate",
    "NamedScore",
    "Scores",
    "TaskReport",
    "build_report",
    "compare",
    "is_finished",
    "named_scores",
    "pass_at_k",
    "pass_hat_k",
    "records_from",
    "task_scores",
]
