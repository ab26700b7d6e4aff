"""``corral show``: one trial's commit history, what it got from its parents, readably."""

from __future__ import annotations

import json
from collections.abc import Mapping
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

# load_history and no_benchmark are re-exported: their home before they moved.
from .._costs import format_cost
from .._history import TrialHistory
from .._history import load_history as load_history
from .._history import no_benchmark as no_benchmark
from .._terminal import clean
from .._types import UNCHANGED, Commit, Usage
from ..history import (
    ActionPayload,
    CommitKind,
    EvaluationPayload,
    ModelCallPayload,
    ReopenPayload,
    SetupPayload,
    StoredTask,
    TerminalPayload,
    ToolEffectPayload,
    TrialFold,
    UsagePayload,
    decode,
    failed_attempts_of,
    latest_attempt,
    scored_terminal,
    status_of,
)
from ._tables import ID_OVERFLOW

#: Characters of one rendered value before it is cut short.
VALUE_WIDTH = 100


def render_history(history: TrialHistory) -> RenderableType:
    commits = history.commits
    reopened = any(c.kind == "reopen" for c in commits)
    errors: list[RenderableType] = []
    run = 1
    shown = 0  # failed attempts shown in this run: each commit that has them has all so far
    for c in commits:
        if c.kind == "reopen":
            run, shown = run + 1, 0
        failed = failed_attempts_of(c)
        for f in failed[shown:]:  # each retried attempt's error, before the last
            what = f"attempt {f.get('attempt')} failed"
            error = (f.get("error"), f.get("error_type"), f.get("traceback"))
            errors += ["", _error(c, run if reopened else None, what, *error)]
        shown = max(shown, len(failed))
        failure = _failure(c)
        if failure is not None:
            what = "evaluation error" if c.kind == CommitKind.EVALUATION else "error"
            p = failure
            error = (p.error, p.error_type, p.traceback)
            errors += ["", _error(c, run if reopened else None, what, *error)]
    return Group(header(history), _commits(commits), *errors)


def header(history: TrialHistory) -> Table:
    """The trial, its task, outcome, budget, start and inputs."""
    meta = StoredTask.decode(history.metadata)
    grid = Table.grid(padding=(0, 2))
    # Folded, never cut: a long task, model or parent id cut at the console's edge
    # reads as another alike but for its end.
    grid.add_column(style="dim", overflow=ID_OVERFLOW)
    grid.add_column(overflow=ID_OVERFLOW)
    grid.add_row(
        "trial",
        Text.assemble(
            (history.task_id, "bold"), f" #{history.trial} of ", (history.benchmark_id, "bold")
        ),
    )
    grid.add_row(
        "task",
        f"agent {meta.agent_id} · environment {meta.environment_id} · "
        f"model {meta.model or '-'} · max_iterations {meta.max_iterations}",
    )
    grid.add_row("outcome", _outcome(history.commits))
    grid.add_row("budget", budget_text(latest_attempt(history.commits)))
    if history.commits:
        grid.add_row("started", _timestamp(history.commits[0].created_at))
    grid.add_row("inputs", compact({} if meta.inputs is None else meta.inputs))
    for parent, result in history.parents.items():
        grid.add_row(
            f"from {parent}",
            "not finished"
            if result.status is None
            else f"{result.status} -> {compact(result.output)}",
        )
    return grid


def _outcome(commits: list[Commit]) -> str:
    """How the latest attempt ended (and its latest evaluation); usage over every attempt."""
    latest = latest_attempt(commits)
    # The one fold's: an evaluation naming an earlier attempt's terminal is not its.
    fold = TrialFold.of(latest)
    terminal = fold.terminal
    if terminal is None:
        parts = ["running or interrupted" if latest else "reopened, not started again"]
        if not commits:
            parts = ["not started"]
    else:
        parts = [describe(terminal)]
        evaluation = fold.evaluation
        if evaluation is not None:
            verdict = describe(evaluation)
            if status_of(terminal) == "limit" and verdict.startswith("passed"):
                verdict += " (over budget: never counts as passed)"
            parts.append(verdict)
    # "attempts" are retries within one run of the trial; "runs" are its reruns.
    reopened = sum(1 for c in commits if c.kind == "reopen")
    if reopened:
        parts.append(f"latest of {reopened + 1} runs")
    usage = sum((c.usage for c in commits), Usage())
    if usage:
        parts.append(_usage(usage))
    return " · ".join(parts)


def budget_text(commits: list[Commit]) -> str:
    """The budget the latest attempt ran under (as its setup or terminal recorded it),
    each limit with what the attempt spent; which one ended it, if one did."""
    budget: Any = {}
    worked = 0.0
    ended = None
    for c in commits:
        if isinstance(c.payload, dict) and c.kind in _STAMPED:
            p = decode(c)
            assert isinstance(p, _STAMPED_PAYLOADS)
            budget = p.stamp.budget if p.stamp.budget is not None else budget
            worked = p.stamp.worked if p.stamp.worked is not None else worked
            if isinstance(p, TerminalPayload) and p.limit is not None:
                ended = p.limit
    # Not a rescore's of an earlier attempt (its scorer spent on that one, as the fold says).
    usage = sum((c.usage for c in commits if scored_terminal(c) is None), Usage())
    spent = {
        "token_limit": f"{usage.input_tokens + usage.output_tokens:,} tokens",
        "cost_limit": f"cost {usage.cost:.5g}",
        "working_time_limit": f"{worked:.3f} s working",
    }
    if not isinstance(budget, Mapping):  # not as Corral writes it: as stored
        return compact(budget)
    if not budget:
        return "none (spent " + ", ".join(spent.values()) + ")"
    parts = [_limit(name, limit, spent) for name, limit in budget.items()]
    if ended is not None:
        parts.append(f"ended by {ended}")
    return " · ".join(parts)


def _limit(name: str, limit: Any, spent: Mapping[str, str]) -> str:
    """One limit of a budget with what was spent of it; a limit this version does not
    know, or that is not a number a float holds, as stored (the store keeps any JSON a
    payload has: an integer past a float's range too, which ``:g`` cannot format)."""
    if name in spent and type(limit) in (int, float):
        with suppress(OverflowError):
            return f"{name} {limit:g}: spent {spent[name]}"
    return f"{name} {compact(limit)}"


def _commits(commits: list[Commit]) -> Table:
    table = Table(show_edge=False, box=None, padding=(0, 1), header_style="bold dim")
    table.add_column("seq", justify="right")
    table.add_column("kind")
    table.add_column("time", justify="right")
    table.add_column("what", overflow="fold")
    table.add_column("usage", justify="right")
    start = commits[0].created_at if commits else 0.0
    run = 1
    if any(c.kind == "reopen" for c in commits):
        table.add_row("", "", "", Text("run 1", style="bold"), "")
    for c in commits:
        if c.kind == "reopen":
            # A run boundary: what follows is the trial's next (the report's latest).
            run += 1
            table.add_section()
            table.add_row(
                str(c.seq),
                c.kind,
                f"+{c.created_at - start:.3f}s",
                Text(f"run {run}: {describe(c)}", style="bold"),
                "",
            )
            continue
        table.add_row(
            str(c.seq),
            c.kind,
            f"+{c.created_at - start:.3f}s",
            describe(c),
            _usage(c.usage) if c.usage else "",
        )
    return table


_STAMPED = frozenset({"setup", "action", "tool_effect", "terminal", "usage"})
_STAMPED_PAYLOADS = (SetupPayload, ActionPayload, ToolEffectPayload, TerminalPayload, UsagePayload)


def describe(commit: Commit) -> str:
    """One line for one commit's payload."""
    if not isinstance(commit.payload, dict):
        return compact(commit.payload)
    p = decode(commit)
    if isinstance(p, SetupPayload):
        seen = p.previous_trial
        return f"state {compact(p.state)}" + (f" · sees trial {seen}" if seen is not None else "")
    if isinstance(p, ActionPayload):
        arguments = _arguments(p.arguments)
        return f"{p.tool}({arguments}) · turn {p.turn}.{p.index} · key {str(p.step_key)[:17]}"
    if isinstance(p, ToolEffectPayload):
        text = f"#{p.action_seq} -> {compact(p.observation)}"
        return text + (f" · state <- {compact(p.state)}" if p.state is not UNCHANGED else "")
    if isinstance(p, TerminalPayload):
        parts = [str(p.status)]
        if p.output is not None:
            parts.append(f"output {compact(p.output)}")
        if p.error:
            parts.append(f"error {p.error}")
        parts.append(f"attempts {p.attempts}")
        failed = failed_attempts_of(commit)
        if failed:
            parts.append(f"{len(failed)} failed and retried (errors below)")
        return " · ".join(parts)
    if isinstance(p, EvaluationPayload):
        # A rescore of the earlier attempt a rerun left counted, listed after its reopen.
        of = "" if p.terminal_seq is None else f" · of the terminal at seq {p.terminal_seq}"
        if p.passed is None:
            tries = p.attempts
            after = f" after {tries} attempts" if isinstance(tries, int) and tries > 1 else ""
            return f"evaluation failed{after}{of}: {p.error}"
        verdict = "passed" if p.passed else "failed"
        details, scores = p.details, p.scores
        named = f" · scores {compact(scores)}" if scores else ""
        text = f"{verdict} · score {p.score}{of}{named}"
        return text + (f" · {compact(details)}" if details else "")
    if isinstance(p, ModelCallPayload):
        return _call(p)
    if isinstance(p, UsagePayload):
        # Landed as the run was cancelled: what no model call's commit carried.
        parts = [f"spent {_usage(commit.usage)} without a model call" if commit.usage else ""]
        failed = failed_attempts_of(commit)
        if failed:
            parts.append(f"{len(failed)} failed and retried (errors below)")
        return " · ".join(["run cancelled", *filter(None, parts)])
    assert isinstance(p, ReopenPayload)
    previous = p.previous_status
    why = (p.reason or "?") + (
        f"; the earlier run ended {previous}" if previous is not None else ""
    )
    return f"reopened ({why})"


def _arguments(arguments: Any) -> str:
    """An action's arguments as ``k=v, ...``; arguments that are not an object (an
    agent's `Action.arguments` are not checked) as they are."""
    if not isinstance(arguments, Mapping):
        return "" if arguments is None else compact(arguments)
    return ", ".join(f"{k}={compact(v)}" for k, v in arguments.items())


def _call(p: ModelCallPayload) -> str:
    """A model call in one line (``--transcript`` shows it whole)."""
    parts = [f"{p.model or 'model ?'}: {len(p.messages)} new message(s)"]
    if p.error is not None:
        parts.append(f"gave up: {p.error}")
    else:
        if p.text:
            parts.append(f"said {compact(p.text)}")
        if p.tool_calls:
            parts.append(f"{len(p.tool_calls)} tool call(s)")
        if p.reasoning:
            parts.append("reasoning")
    if p.latency is not None:
        parts.append(f"{p.latency:.2f} s")
    if p.failed:
        tries = "try" if len(p.failed) == 1 else "tries"
        parts.append(f"{len(p.failed)} failed {tries} ({', '.join(f.kind for f in p.failed)})")
    return " · ".join(parts)


def _failure(commit: Commit) -> TerminalPayload | EvaluationPayload | None:
    """A terminal that records an error, or an evaluation that failed."""
    if not isinstance(commit.payload, dict) or commit.kind not in _FAILING:
        return None
    p = decode(commit)
    assert isinstance(p, TerminalPayload | EvaluationPayload)
    if not p.error or (isinstance(p, EvaluationPayload) and p.passed is not None):
        return None
    return p


_FAILING = frozenset({"terminal", "evaluation"})


def _error(
    commit: Commit, run: int | None, what: str, error: Any, error_type: Any, trace: Any
) -> Table:
    """A stored error in full: ``what`` failed, its type, message and trimmed traceback."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column(overflow="fold")
    where = f"seq {commit.seq}" + (f", run {run}" if run is not None else "")
    # rich's Text drops BEL, CR and BS silently: escaped first, they read as elsewhere.
    grid.add_row(what, Text.assemble((clean(str(error)), "bold red"), f"  ({where})"))
    if error_type:
        grid.add_row("type", clean(str(error_type)))
    if trace:
        grid.add_row("traceback", Text(clean(str(trace).rstrip())))
    return grid


def compact(value: Any, width: int = VALUE_WIDTH) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _usage(usage: Usage) -> str:
    text = f"{usage.input_tokens}+{usage.output_tokens} tok"
    return text + (f" {format_cost(usage.cost)}" if usage.cost else "")


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
