"""``corral show``: one trial's commit history, what it got from its parents, readably."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .._errors import ConfigError
from .._types import Commit, Usage
from ..store import CommitStore, TrialKey

#: Characters of one rendered value before it is cut short.
VALUE_WIDTH = 100


@dataclass(frozen=True, slots=True)
class ParentResult:
    """How a parent's trial of the same round ended, and the output it passed on."""

    status: str | None  # None: no terminal commit yet
    output: Any


@dataclass(frozen=True, slots=True)
class TrialHistory:
    benchmark_id: str
    task_id: str
    trial: int
    metadata: Mapping[str, Any]
    parents: dict[str, ParentResult]
    commits: list[Commit]

    def to_dict(self) -> dict[str, Any]:
        return {
            "benchmark_id": self.benchmark_id,
            "task_id": self.task_id,
            "trial": self.trial,
            "metadata": dict(self.metadata),
            "parents": {
                p: {"status": r.status, "output": r.output} for p, r in self.parents.items()
            },
            "commits": [
                {
                    "seq": c.seq,
                    "kind": c.kind,
                    "created_at": c.created_at,
                    "payload": c.payload,
                    "usage": c.usage.to_dict(),
                }
                for c in self.commits
            ],
        }


async def load_history(
    store: CommitStore, benchmark_id: str, task_id: str, trial: int
) -> TrialHistory:
    """The trial's commits and its parents' results; a `ConfigError` for unknown ids."""
    config = await store.benchmark_config(benchmark_id)
    if config is None:
        raise ConfigError(f"no benchmark {benchmark_id!r} in the store")
    tasks = config["tasks"]
    if task_id not in tasks:
        raise ConfigError(f"benchmark {benchmark_id!r} has no task {task_id!r}")
    trials = int(config["trials_per_task"])
    if not 0 <= trial < trials:
        raise ConfigError(
            f"trial {trial} is out of range: benchmark {benchmark_id!r} has trials 0..{trials - 1}"
        )
    parents = {}
    for parent in tasks[task_id].get("dependencies", []):
        history = await store.history(TrialKey(benchmark_id, parent, trial))
        terminal = next((c for c in history if c.kind == "terminal"), None)
        parents[parent] = (
            ParentResult(None, None)
            if terminal is None
            else ParentResult(terminal.payload.get("status"), terminal.payload.get("output"))
        )
    commits = await store.history(TrialKey(benchmark_id, task_id, trial))
    return TrialHistory(benchmark_id, task_id, trial, tasks[task_id], parents, commits)


def render_history(history: TrialHistory) -> RenderableType:
    return Group(_header(history), _commits(history.commits))


def _header(history: TrialHistory) -> Table:
    meta = history.metadata
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    grid.add_row(
        "trial",
        Text.assemble(
            (history.task_id, "bold"), f" #{history.trial} of ", (history.benchmark_id, "bold")
        ),
    )
    grid.add_row(
        "task",
        f"agent {meta.get('agent_id')} · environment {meta.get('environment_id')} · "
        f"model {meta.get('model') or '-'} · max_iterations {meta.get('max_iterations')}",
    )
    grid.add_row("outcome", _outcome(history.commits))
    if history.commits:
        grid.add_row("started", _timestamp(history.commits[0].created_at))
    grid.add_row("inputs", compact(meta.get("inputs", {})))
    for parent, result in history.parents.items():
        grid.add_row(
            f"from {parent}",
            "not finished"
            if result.status is None
            else f"{result.status} -> {compact(result.output)}",
        )
    return grid


def _outcome(commits: list[Commit]) -> str:
    terminal = next((c for c in commits if c.kind == "terminal"), None)
    if terminal is None:
        return "running or interrupted" if commits else "not started"
    parts = [describe(terminal)]
    evaluation = next((c for c in commits if c.kind == "evaluation"), None)
    if evaluation is not None:
        parts.append(describe(evaluation))
    usage = sum((c.usage for c in commits), Usage())
    if usage:
        parts.append(_usage(usage))
    return " · ".join(parts)


def _commits(commits: list[Commit]) -> Table:
    table = Table(show_edge=False, box=None, padding=(0, 1), header_style="bold dim")
    table.add_column("seq", justify="right")
    table.add_column("kind")
    table.add_column("time", justify="right")
    table.add_column("what", overflow="fold")
    table.add_column("usage", justify="right")
    start = commits[0].created_at if commits else 0.0
    for c in commits:
        table.add_row(
            str(c.seq),
            c.kind,
            f"+{c.created_at - start:.3f}s",
            describe(c),
            _usage(c.usage) if c.usage else "",
        )
    return table


def describe(commit: Commit) -> str:
    """One line for one commit's payload."""
    p = commit.payload
    kind = commit.kind
    if not isinstance(p, dict):
        return compact(p)
    if kind == "setup":
        seen = p.get("previous_trial")
        return f"state {compact(p.get('state'))}" + (
            f" · sees trial {seen}" if seen is not None else ""
        )
    if kind == "action":
        arguments = ", ".join(f"{k}={compact(v)}" for k, v in (p.get("arguments") or {}).items())
        return (
            f"{p.get('tool')}({arguments}) · turn {p.get('turn')}.{p.get('index')} "
            f"· key {str(p.get('step_key'))[:17]}"
        )
    if kind == "tool_effect":
        text = f"#{p.get('action_seq')} -> {compact(p.get('observation'))}"
        return text + (f" · state <- {compact(p['state'])}" if "state" in p else "")
    if kind == "terminal":
        parts = [str(p.get("status"))]
        if p.get("output") is not None:
            parts.append(f"output {compact(p['output'])}")
        if p.get("error"):
            parts.append(f"error {p['error']}")
        parts.append(f"attempts {p.get('attempts')}")
        return " · ".join(parts)
    if kind == "evaluation":
        if "passed" not in p:
            return f"evaluation failed: {p.get('error')}"
        verdict = "passed" if p["passed"] else "failed"
        details = p.get("details")
        return f"{verdict} · score {p.get('score')}" + (f" · {compact(details)}" if details else "")
    return compact(p)


def compact(value: Any, width: int = VALUE_WIDTH) -> str:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"


def _usage(usage: Usage) -> str:
    text = f"{usage.input_tokens}+{usage.output_tokens} tok"
    return text + (f" ${usage.cost:.5f}" if usage.cost else "")


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
