"""One trial's runtime: session, projection, turns, retries, evaluation."""

from ._evaluate import evaluate_trial
from ._jobs import Previous
from ._projection import Projection
from ._retry import RetryPolicy
from ._session import AgentSession
from ._trial import TrialPlan, run_trial, step_key

__all__ = [
    "AgentSession",
    "Previous",
    "Projection",
    "RetryPolicy",
    "TrialPlan",
    "evaluate_trial",
    "run_trial",
    "step_key",
]
