"""The kinds of commit a trial's history holds."""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class CommitKind(StrEnum):
    """What one commit records (stored as its value: the names never change)."""

    SETUP = "setup"
    ACTION = "action"
    TOOL_EFFECT = "tool_effect"
    TERMINAL = "terminal"
    EVALUATION = "evaluation"
    #: A finished trial given a fresh attempt (``run(..., rerun=...)``): everything
    #: before it stays in the history; the trial starts again after it.
    REOPEN = "reopen"


#: Every kind's stored name (what a store accepts in its ``kind`` column).
KINDS: Final = frozenset(str(k) for k in CommitKind)
