"""Make tests/data/v2_store with Corral 636b00a (before the history package): the demo,
and an API benchmark with tool actions, retries, errors, a budget, a failed scorer,
reruns (reopen commits) and an unfinished resume; then what `list`, `report` and
`show` printed for it, in expected/ (tests/test_v2_store.py compares them). The
store was made by 636b00a; expected/ was printed by main at a12b91d (the last main
before the history package; `make_v2_store.py DIR --expected`), whose output adds columns;
the JSON reports (report-*.txt) have since gained two lines each, `"named_scores": {}`
and `"generation": {}` (no named scores, no agent with generation settings: empty
mappings, every other key as it was)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import anyio

from corral import (
    Action,
    BenchmarkTaskMetadata,
    CorralRunner,
    Evaluation,
    Final,
    RetryPolicy,
    ToolEffect,
)
from corral.testing import FakeEnvironment, ScriptedAgent

FIXED = {"second": False}


def decide(s):
    s.record_usage(input_tokens=10 * (s.iteration + 1), output_tokens=2, cost=0.25)
    if s.task_id == "flaky" and s.attempt == 0 and s.trial == 0:
        raise RuntimeError("flaky once")
    if s.task_id == "broken" and not FIXED["second"]:
        raise ValueError("always broken")
    if s.task_id == "hungry" and not FIXED["second"]:
        s.record_usage(input_tokens=5000)
    if s.task_id == "loop":
        return Action("noop", {"i": s.iteration})
    if s.iteration < 2:
        return Action("add", {"x": s.iteration, "inputs": sorted(s.inputs)})
    return Final({"trial": s.trial, "seen": len(s.steps)})


def effect(action, s):
    return ToolEffect({"ok": action.arguments}, state={"n": s.iteration})


def evaluate(r):
    if r.task_id == "scorer" and r.trial == 1:
        raise KeyError("scorer broke")
    return Evaluation(float(r.trial % 2), r.trial % 2 == 1, {"t": r.trial})


TASKS = {
    "parent": BenchmarkTaskMetadata("a", "e", model="m1"),
    "child": BenchmarkTaskMetadata("a", "e", model="m2", dependencies=("parent",)),
    "flaky": BenchmarkTaskMetadata("a", "e"),
    "broken": BenchmarkTaskMetadata("a", "e"),
    "hungry": BenchmarkTaskMetadata("a", "e", token_limit=1000),
    "loop": BenchmarkTaskMetadata("a", "e", max_iterations=2),
    "scorer": BenchmarkTaskMetadata("a", "e"),
}


def runner(store, **kw):
    return CorralRunner(
        TASKS,
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment(state={"n": 0}, effect=effect, evaluate=evaluate)},
        store=store,
        retry_policy=RetryPolicy(max_retries=1, backoff_base=0, backoff_cap=0),
        **kw,
    )


async def runs(store):
    await runner(store).run("api", trials_per_task=2, k_values=(1, 2))
    FIXED["second"] = True
    await runner(store).run("api", trials_per_task=2, k_values=(1, 2), rerun=("error", "limit"))
    # A few trials of "parent" only, cut short by a run cost limit: unfinished trials.
    await runner(store).run("cut", task_ids=["parent"], trials_per_task=6, run_cost_limit=1.0)


#: What `make` printed, by file name in expected/: the arguments of `corral`.
COMMANDS = {"list": ("list",)}
for b in ("api", "cut", "demo"):
    COMMANDS[f"report-{b}"] = ("report", b, "--json")
    COMMANDS[f"report-{b}-text"] = ("report", b)
for task, trial in (("flaky", 0), ("broken", 0), ("hungry", 1), ("loop", 0), ("scorer", 1)):
    COMMANDS[f"show-api-{task}-{trial}"] = ("show", "api", task, str(trial))
for task in ("bid-plan", "bid-build", "bid-verify", "arith-2-large"):
    COMMANDS[f"show-demo-{task}"] = ("show", "demo", task, "0", "--json")
    COMMANDS[f"show-demo-{task}-text"] = ("show", "demo", task, "0")


def make(out):
    for name in ("store.db", "store.db-wal", "store.db-shm"):
        (out / name).unlink(missing_ok=True)
    for name in ("reports", "expected", ".corral-claims"):
        shutil.rmtree(out / name, ignore_errors=True)
    store = out / "store.db"
    anyio.run(runs, store)
    demo = ("demo", "--fast", "--no-progress", "--benchmark-id", "demo")
    subprocess.run([sys.executable, "-m", "corral", *demo], env=ENV, cwd=out, check=True)
    expect(out)


ENV = {**os.environ, "CORRAL_STORE": "store.db", "COLUMNS": "200", "NO_COLOR": "1"}


def expect(out):
    """What this Corral prints of the store in ``out``, into ``out``/expected (run with
    ``--expected`` by the Corral the history package is checked against)."""
    env = ENV
    shutil.rmtree(out / "expected", ignore_errors=True)
    expected = out / "expected"
    expected.mkdir()
    for name, args in COMMANDS.items():
        done = subprocess.run(
            [sys.executable, "-m", "corral", *args],
            env=env,
            cwd=out,
            capture_output=True,
            text=True,
        )
        (expected / f"{name}.txt").write_text(f"exit {done.returncode}\n{done.stdout}")
    for name in ("store.db-wal", "store.db-shm"):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / ".corral-claims", ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[2:] == ["--expected"]:
        expect(Path(sys.argv[1]))
    else:
        make(Path(sys.argv[1]))
