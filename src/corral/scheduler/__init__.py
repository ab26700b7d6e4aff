"""Scheduling: limits, the task plan, admission (one decision) and the run loop."""

from ._admission import Admission, Statistics
from ._limits import Limits
from ._plan import RunPlan, build_plan
from ._resume import Resume
from ._run import RunLoop

__all__ = ["Admission", "Limits", "Resume", "RunLoop", "RunPlan", "Statistics", "build_plan"]
