"""The live display's logic as plain objects: the ETA bound by the limit that binds,
pass@1 by model and with resumed trials, why queued trials wait, and the stopping line."""

from __future__ import annotations

import dataclasses
import io
from typing import Any

from rich.console import Console

import corral
from corral._runner import RunInfo
from corral.progress import ProgressDisplay, Tally
from corral.progress._eta import Lane, estimate_eta
from corral.progress._view import queue_reasons
from corral.scheduler import build_plan
from corral.store import TrialKey

from ..support.extra_limit import BY_AGENT

Meta = corral.BenchmarkTaskMetadata
COMPLETED = corral.TrialStatus.COMPLETED


def _text(renderable: Any) -> str:
    console = Console(file=io.StringIO(), width=200)
    console.print(renderable)
    out = console.file
    assert isinstance(out, io.StringIO)
    return out.getvalue()


def _stats(**changes: Any) -> corral.Statistics:
    base = corral.Statistics(
        executing=0,
        evaluating=0,
        ready=0,
        awaiting_evaluation=0,
        finished=0,
        total=0,
        by_model={},
        by_environment={},
        evaluations_by_environment={},
        effective_by_model={},
    )
    return dataclasses.replace(base, **changes)


def _commit(kind: str, at: float, payload: Any = None) -> corral.Commit:
    return corral.Commit(0, kind, payload if payload is not None else {}, at)


def _trial(
    sink: ProgressDisplay | Tally, task: str, trial: int, start: float, end: float, passed: bool
) -> None:
    """One trial's durable commits, as the runner hands them to observers."""
    key = TrialKey("b", task, trial)
    for commit in (
        _commit("setup", start),
        _commit("terminal", end, {"status": "completed", "attempts": 1}),
        _commit("evaluation", end, {"score": 1.0, "passed": passed, "details": {}}),
    ):
        if isinstance(sink, ProgressDisplay):
            sink.on_commit(key, commit)
        else:
            sink.add(commit, key)


def test_a_lane_bounds_the_eta_from_below() -> None:
    # 100 trials left on a model limited to 2, 1 s each: at least 50 s, even though
    # the run's own rate (fast trials elsewhere) says 10 s.
    slow = Lane("model slow", remaining=100, limit=2, mean_duration=1.0)
    fast = Lane("model fast", remaining=100, limit=8, mean_duration=0.1)
    eta, binding = estimate_eta(remaining=200, done_now=200, elapsed=10.0, lanes=[slow, fast])
    assert eta is not None and eta >= 50.0
    assert binding == "model slow"
    assert estimate_eta(200, 200, 100.0, [slow]) == (100.0, None)  # the rate is slower
    assert estimate_eta(0, 5, 1.0, [slow]) == (0.0, None)
    assert estimate_eta(10, 0, 1.0, [Lane("x", 10, 2, None)]) == (None, None)


def _info(models: dict[str, int], statistics: corral.Statistics, resumed: int = 0) -> RunInfo:
    tasks = {f"{m}-{i}": Meta("a", "e", model=m) for m, n in models.items() for i in range(n)}
    plan = build_plan(tasks, None, include_dependencies=True, trials_per_task=1)
    limits = corral.Limits.resolve(max_parallel=8, max_parallel_by_model={"slow": 2})
    return RunInfo("b", plan, limits, ("e",) * len(tasks), lambda: statistics, resumed)


def test_the_display_eta_accounts_for_a_binding_model_limit() -> None:
    now = [0.0]
    statistics = _stats(total=208, finished=0, executing=8, by_model={"slow": 2, "fast": 6})
    display = ProgressDisplay(Console(file=io.StringIO()), clock=lambda: now[0])
    display.on_run_start(_info({"slow": 104, "fast": 104}, statistics))
    # 4 slow trials of 1 s each and 104 fast ones done in 10 s.
    for i in range(4):
        _trial(display, f"slow-{i}", 0, 0.0, 1.0, passed=True)
    for i in range(104):
        _trial(display, f"fast-{i}", 0, 0.0, 0.1, passed=i % 2 == 0)
    now[0] = 10.0
    statistics = dataclasses.replace(statistics, finished=108)
    display._info = dataclasses.replace(display._info, statistics=lambda: statistics)  # type: ignore[arg-type]
    frame = _text(display.renderable())
    # 100 slow trials left, 2 at a time, 1 s each: 50 s, not the 9 s the rate says.
    assert "ETA 50 s (bound by model slow)" in frame
    assert "pass@1 by model: fast 0.50 (52/104) · slow 1.00 (4/4)" in frame


def test_the_eta_has_a_lane_per_key_of_every_declared_execution_limit() -> None:
    # A limit declared in the tests only (per agent): its keys are ETA lanes.
    tasks = {f"{a}-{i}": Meta(a, "e") for a in ("slow", "fast") for i in range(104)}
    plan = build_plan(tasks, None, include_dependencies=True, trials_per_task=1)
    limits = corral.Limits.resolve(
        max_parallel=8, declarations=(BY_AGENT,), max_parallel_by_agent={"slow": 2}
    )
    now = [0.0]
    statistics = _stats(total=208, finished=108, executing=8)
    display = ProgressDisplay(Console(file=io.StringIO()), clock=lambda: now[0])
    display.on_run_start(RunInfo("b", plan, limits, ("e",) * 208, lambda: statistics, 0))
    for i in range(4):
        _trial(display, f"slow-{i}", 0, 0.0, 1.0, passed=True)
    for i in range(104):
        _trial(display, f"fast-{i}", 0, 0.0, 0.1, passed=True)
    now[0] = 10.0
    assert "ETA 50 s (bound by agent slow)" in _text(display.renderable())


def test_pass_at_1_so_far_includes_resumed_trials_when_their_records_are_known() -> None:
    tally = Tally({"t": ("m", "e"), "u": ("n", "e")})
    records = [
        corral.TrialRecord(
            "t", 0, corral.TrialStatus.COMPLETED, evaluation=corral.Evaluation(1, True)
        ),
        corral.TrialRecord("u", 0, corral.TrialStatus.ERROR),
    ]
    tally.resume(2, records)
    _trial(tally, "t", 1, 0.0, 1.0, passed=False)
    assert tally.pass_counts == (1, 3)
    assert tally.models["m"].pass_rate == 0.5 and tally.models["n"].pass_rate == 0.0


def test_queued_trials_name_the_limit_that_holds_them() -> None:
    limits = corral.Limits.resolve(
        max_parallel=8, max_parallel_by_model={"m": 2}, max_parallel_by_environment={"e": 3}
    )
    held = _stats(
        ready=5,
        executing=5,
        by_model={"m": 2, "n": 3},
        effective_by_model={"m": 2, "n": 8},
        by_environment={"e": 3},
    )
    assert queue_reasons(held, limits) == ["model m 2/2", "environment e 3/3"]
    full = dataclasses.replace(held, executing=8)
    assert queue_reasons(full, limits)[0] == "max_parallel 8/8"
    assert queue_reasons(dataclasses.replace(held, ready=0), limits) == []
    throttled = dataclasses.replace(held, effective_by_model={"m": 2, "n": 3})
    assert "model n 3/3 (rate-limited from 8)" in queue_reasons(throttled, limits)
    # Cut below what is in use (the trials running finish): the line says why.
    cut = dataclasses.replace(held, effective_by_model={"m": 1, "n": 8})
    assert "model m 2/1 (rate-limited from 2)" in queue_reasons(cut, limits)


def test_after_a_ctrl_c_the_display_says_it_is_stopping() -> None:
    statistics = _stats(total=4, finished=3)
    display = ProgressDisplay(Console(file=io.StringIO()))
    display.on_run_start(_info({"m": 4}, statistics, resumed=1))
    _trial(display, "m-0", 0, 0.0, 1.0, passed=True)
    assert "stopping" not in _text(display.renderable())
    display.stopping()
    # Durable trials only: 1 resumed + 1 this run (the scheduler's 3 includes one in flight).
    assert "stopping: 2 of 4 trials done" in _text(display.renderable())
    display.on_run_end(display._info)  # type: ignore[arg-type]
