"""Scheduling: limits, the task plan, admission (one decision) and the run loop."""

from ._admission import Admission, Statistics
from ._keyed import KEYED_LIMITS, KeyedLimit, KnownKeys, LimitPhase
from ._limits import Limits
from ._plan import RunPlan, build_plan
from ._resume import Resume
from ._run import RunLoop

__all__ = [
    "KEYED_LIMITS",
    "Admission",
    "KeyedLimit",
    "KnownKeys",
    "LimitPhase",
    "Limits",
    "Resume",
    "RunLoop",
    "RunPlan",
    "Statistics",
    "build_plan",
]
