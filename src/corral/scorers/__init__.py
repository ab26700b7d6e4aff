"""Ready scorers: each is usable as an environment's ``evaluate`` (it takes the
`corral.TrialRecord` and returns a `corral.Evaluation`), or with others in `combine`
for several named scores.

They compare ``trial.output`` with ``trial.target`` (a task's
``BenchmarkTaskMetadata(..., target=...)``; a list of targets accepts any).
"""

from ._base import Scorer
from ._combine import combine, scorer
from ._graded import model_graded
from ._match import choice, exact, includes, pattern
from ._numbers import f1, numeric

__all__ = [
    "Scorer",
    "choice",
    "combine",
    "exact",
    "f1",
    "includes",
    "model_graded",
    "numeric",
    "pattern",
    "scorer",
]
