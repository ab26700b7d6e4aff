"""The errors of a trial's failed and retried attempts, as its commits record them.

Each attempt after a failure carries every failed attempt so far on its first commit
(and the terminal carries them all), so a crash loses none and the latest list is the
whole story; no commit of their own, which would shift the step keys of later actions.
"""

from __future__ import annotations

from typing import Any

from .._types import Commit

KEY = "failed_attempts"


def recorded(commit: Commit) -> list[dict[str, Any]]:
    """The failed attempts one commit records (well-formed entries only)."""
    p = commit.payload
    failed = p.get(KEY) if commit.kind != "evaluation" and isinstance(p, dict) else None
    if not isinstance(failed, list):
        return []
    return [f for f in failed if isinstance(f, dict) and f.get("error")]
