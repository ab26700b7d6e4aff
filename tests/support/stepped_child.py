"""The parent's side of a kill -9 test: a child process that prints each acknowledged
commit as a JSON line and waits for a line on stdin before it goes on, so the parent
kills it at an exact commit (see `tests.support.crash_child`, `tests.support.tool_agent_child`)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

Acked = list[dict[str, object]]


def run_child_until(module: str, args: Sequence[str], kill: Callable[[Acked], bool]) -> Acked:
    """Run ``python -m module *args``; SIGKILL it as soon as ``kill(acked)`` holds.

    Returns the commits it acknowledged (all of them if it finished first)."""
    child = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'src'}"},
    )
    assert child.stdin is not None and child.stdout is not None
    acked: Acked = []
    try:
        for line in child.stdout:
            if line.strip() == "done":
                break
            acked.append(json.loads(line))
            if kill(acked):
                child.send_signal(signal.SIGKILL)
                break
            child.stdin.write("\n")
            child.stdin.flush()
    finally:
        child.kill()
        child.wait()
    return acked
