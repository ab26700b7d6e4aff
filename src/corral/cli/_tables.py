"""The pass@k table and the lines under it, as rich renderables."""

from __future__ import annotations

from pathlib import Path

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from ..report import BenchmarkReport


def report_table(report: BenchmarkReport) -> Table:
    """One row per task (task, model, env, passed/n, pass@k...), then the mean."""
    ks = report.k_values
    table = Table(
        title=f"{report.benchmark_id}: pass@k over {report.trials_per_task} trials per task",
        title_justify="left",
        caption="* added by dependency closure" if report.added_by_dependencies else None,
        caption_justify="left",
    )
    table.add_column("task", no_wrap=True)
    table.add_column("model")
    table.add_column("env")
    table.add_column("passed", justify="right")
    for k in ks:
        table.add_column(f"pass@{k}", justify="right")
    passed = trials = 0
    for task_id, task in report.tasks.items():
        n = len(task.trials)
        passed += task.passed
        trials += n
        table.add_row(
            task_id + (" *" if task.added_by_dependencies else ""),
            task.model or "-",
            task.environment_id,
            f"{task.passed}/{n}",
            *(_score(task.pass_at_k.get(k)) for k in ks),
        )
    table.add_section()
    table.add_row(
        Text(f"mean of {len(report.tasks)} tasks", style="bold"),
        "",
        "",
        f"{passed}/{trials}",
        *(Text(_score(report.pass_at_k.get(k)), style="bold") for k in ks),
    )
    return table


def report_summary(report: BenchmarkReport, json_path: Path | None) -> Table:
    """Counts by status, usage, wall time and where the JSON report is."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column()
    counts = [f"{status} {n}" for status, n in report.counts.items() if n]
    grid.add_row("trials", " · ".join(counts) or "none")
    usage = report.usage
    if usage:
        grid.add_row(
            "usage",
            f"{usage.input_tokens:,} input + {usage.output_tokens:,} output tokens"
            + (f" · ${usage.cost:.4f}" if usage.cost else ""),
        )
    time = f"{report.wall_seconds:.1f} s wall"
    if report.resumed:
        time += f" · {report.resumed} trials reused from an earlier run"
    grid.add_row("time", time)
    if json_path is not None:
        grid.add_row("report", str(json_path))
    return grid


def models_table(report: BenchmarkReport) -> Table | None:
    """For a several-models run: one row per task, pass@k of each model side by side."""
    models = list(report.by_model)
    suffixes = tuple(f"@{m}" for m in models)
    if len(models) < 2 or not all(t.endswith(suffixes) for t in report.tasks):
        return None
    ks = report.k_values
    table = Table(title="pass@k by model", title_justify="left")
    table.add_column("task", no_wrap=True)
    for model in models:
        for k in ks:
            table.add_column(f"{model}\npass@{k}", justify="right")
    rows: dict[str, dict[str, dict[int, float]]] = {}
    for task_id, task in report.tasks.items():
        base, _, model = task_id.rpartition("@")
        rows.setdefault(base, {})[model] = task.pass_at_k
    for base, by in rows.items():
        table.add_row(base, *(_score(by.get(m, {}).get(k)) for m in models for k in ks))
    table.add_section()
    table.add_row(
        Text(f"mean of {len(rows)} tasks", style="bold"),
        *(Text(_score(report.by_model[m].get(k)), style="bold") for m in models for k in ks),
    )
    return table


def report_renderables(report: BenchmarkReport, json_path: Path | None) -> list[RenderableType]:
    by_model = models_table(report)
    if by_model is not None:
        return [by_model, report_summary(report, json_path)]
    return [report_table(report), report_summary(report, json_path)]


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
