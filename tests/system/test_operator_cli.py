"""The operator's loop through the real CLI: a broken agent fixed and re-run, a scorer
fixed and re-scored, each killed with SIGKILL in the middle and finished afterwards.

The benchmark file reads its behaviour from the environment, as a user's code
changes between runs. A trial that should hang prints ``READY`` on stderr and
blocks, so the test kills the process at a known point without sleeping.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

BENCH = """
import os, sys
import anyio
import corral
from corral import Action, BenchmarkTaskMetadata as Meta, Evaluation, Final, ToolEffect

AGENT = os.environ["AGENT"]      # broken | hang | fixed
SCORER = os.environ["SCORER"]    # strict | hang | lenient


class Agent:
    async def act(self, session):
        if not session.steps:
            return Action("add", {"x": session.trial})
        if session.task_id == "flaky" and AGENT == "broken":
            raise RuntimeError("agent bug: forgot to carry the one")
        if session.task_id == "flaky" and AGENT == "hang":
            print("READY", session.task_id, session.trial, file=sys.stderr, flush=True)
            await anyio.sleep_forever()
        return Final(session.steps[-1].effect.observation)


class Env:
    async def setup(self, session):
        return {}

    async def execute(self, action, session):
        return ToolEffect(action.arguments["x"] + 1)

    async def evaluate(self, trial):
        if SCORER == "hang" and trial.trial == 2:
            print("READY", trial.task_id, trial.trial, file=sys.stderr, flush=True)
            await anyio.sleep_forever()
        passed = trial.output == trial.trial + 1 and (SCORER != "strict" or trial.trial == 0)
        return Evaluation(float(passed), passed)


benchmark = corral.Benchmark(
    tasks={
        "flaky": Meta("agent", "env"),
        "child": Meta("agent", "env", dependencies=("flaky",)),
        "steady": Meta("agent", "env"),
    },
    agents={"agent": Agent()},
    environments={"env": Env()},
    run_defaults={"trials_per_task": 4, "k_values": (1, 4), "max_retries": 0,
                  "max_parallel": 4, "max_parallel_per_task": 4},
)
"""


@pytest.fixture
def bench(tmp_path: Path) -> Path:
    path = tmp_path / "ops.py"
    path.write_text(BENCH)
    return path


def corral(
    bench: Path, *args: str, agent: str = "fixed", scorer: str = "lenient"
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "corral", *args],
        cwd=bench.parent,
        env={**os.environ, "AGENT": agent, "SCORER": scorer},
        capture_output=True,
        text=True,
        timeout=120,
    )


def killed_at_ready(bench: Path, ready: int, *args: str, agent: str, scorer: str) -> None:
    """Run ``corral *args`` and SIGKILL it once ``ready`` trials print READY."""
    child = subprocess.Popen(
        [sys.executable, "-m", "corral", *args],
        cwd=bench.parent,
        env={**os.environ, "AGENT": agent, "SCORER": scorer},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stderr is not None
    seen = 0
    try:
        for line in child.stderr:
            seen += line.startswith("READY")
            if seen == ready:
                child.send_signal(signal.SIGKILL)
                break
    finally:
        child.kill()
        child.wait()
    assert seen == ready and child.returncode == -signal.SIGKILL


def histories(store: Path) -> dict[tuple[str, int], list[str]]:
    db = sqlite3.connect(store)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    out: dict[tuple[str, int], list[tuple[int, str]]] = {}
    for task, trial, seq, kind in db.execute("SELECT task_id, trial, seq, kind FROM commits"):
        out.setdefault((task, trial), []).append((seq, kind))
    db.close()
    for rows in out.values():  # no gaps, whatever was killed when
        assert sorted(s for s, _ in rows) == list(range(len(rows)))
    return {key: [k for _, k in sorted(rows)] for key, rows in out.items()}


def test_a_broken_agent_fixed_and_rerun_with_a_kill_in_the_middle(bench: Path) -> None:
    store = str(bench.parent / "store.db")
    first = corral(bench, "run", bench.name, "--store", store, "--no-progress", agent="broken")
    assert first.returncode == 1, first.stderr
    assert "RuntimeError: agent bug: forgot to carry the one" in first.stdout
    assert "error 4" in first.stdout or "errors" in first.stdout

    # Re-run the errors with an agent that hangs: killed with all four reopened trials live.
    # A trial's reopen marker is written as it starts: the children, unreachable behind
    # their parents, have none yet (and their records stand).
    args = ("run", bench.name, "--store", store, "--no-progress", "--retry-errors")
    killed_at_ready(bench, 4, *args, agent="hang", scorer="lenient")
    middle = histories(Path(store))
    assert all(h.count("reopen") == 1 for (t, _), h in middle.items() if t == "flaky")
    assert all(h == ["terminal"] for (t, _), h in middle.items() if t == "child")

    fixed = corral(bench, *args, "--json")
    assert fixed.returncode == 0, fixed.stderr
    report = json.loads(fixed.stdout)
    assert report["counts"]["completed"] == 12 and report["pass_at_k"]["1"] == 1.0
    assert report["errors"] == [] and report["complete"] is True
    final = histories(Path(store))
    for trial in range(4):
        flaky = final[("flaky", trial)]
        # The first attempt is kept; one reopen, never two, though a run was killed.
        assert flaky[:3] == ["setup", "action", "tool_effect"] and flaky.count("reopen") == 1
        assert flaky[-2:] == ["terminal", "evaluation"] and flaky.count("terminal") == 2
        assert final[("child", trial)][:2] == ["terminal", "reopen"]  # was unreachable
    shown = corral(bench, "show", "ops", "flaky", "0", "--store", store)
    assert shown.returncode == 0 and "reopened" in shown.stdout
    assert "agent bug" in shown.stdout  # the earlier attempt's error, with its traceback
    assert "ops.py" in shown.stdout  # the user's own frame


def test_a_scorer_fixed_and_rescored_with_a_kill_in_the_middle(bench: Path) -> None:
    store = str(bench.parent / "store.db")
    first = corral(bench, "run", bench.name, "--store", store, "--no-progress", scorer="strict")
    assert first.returncode == 0, first.stderr  # a failed trial is not an error
    before = json.loads(corral(bench, "report", "ops", "--store", store, "--json").stdout)
    assert before["pass_at_k"]["1"] == 0.25

    args = ("rescore", "ops", bench.name, "--store", store, "--no-progress")
    killed_at_ready(bench, 3, *args, agent="fixed", scorer="hang")  # round 2 of each task
    after = corral(bench, *args, "--json")
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["pass_at_k"]["1"] == 1.0
    report = json.loads(corral(bench, "report", "ops", "--store", store, "--json").stdout)
    assert report["pass_at_k"] == {"1": 1.0, "2": 1.0, "4": 1.0}
    kinds = Counter(k for h in histories(Path(store)).values() for k in h)
    assert kinds["evaluation"] >= 2 * 12 and kinds["terminal"] == 12  # nothing re-ran

    failed_only = corral(bench, *args, "--failed-only", "--task", "steady", "--json")
    assert failed_only.returncode == 0
    assert json.loads(failed_only.stdout)["tasks"].keys() == {"steady"}
