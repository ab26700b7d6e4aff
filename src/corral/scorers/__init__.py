"""Ready scorers: each is usable as an environment's ``evaluate`` (it takes the
`corral.TrialRecord` and returns a `corral.Evaluation`), or with others in `combine`
for several named scores. `code_tests` runs the model's program with its tests
in `corral.sandbox`.

They compare ``trial.output`` with ``trial.target`` (a task's
``BenchmarkTaskMetadata(..., target=...)``; a list of targets accepts any).
"""

from ._base import Scorer
from ._code_tests import code_tests
from ._combine import combine, scorer
from ._graded import model_graded
from ._match import choice, exact, includes, pattern
from ._numbers import f1, numeric

__all__ = [
    "Scorer",
    "choice",
    "code_tests",
    "combine",
    "exact",
    "f1",
    "includes",
    "model_graded",
    "numeric",
    "pattern",
    "scorer",
]
