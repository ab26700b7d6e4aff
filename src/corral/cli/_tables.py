"""The metric tables (pass@k, pass^k...) and the lines under them, as rich renderables."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Final

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from .._costs import format_cost
from .._run_meta import shown_generation, shown_provenance
from .._runner import DEFAULT_STORE
from ..report import BenchmarkReport, ErrorGroup, Estimate, NamedScore, Scores, TaskReport
from ..report._calls import calls_line
from ..report._metrics import Metric
from ..report._tasks import mean_label, task_rows
from ..store._open import shown_address

#: Characters of an error message in the summary (``corral show`` prints it whole).
MESSAGE_WIDTH = 160
#: How a column holding an id (a task, model or benchmark id, up to 200 characters)
#: overflows: folded over lines. Rich narrows a table too wide for the console by its
#: wrappable columns, widest first; an unwrappable id column left only cutting every
#: column evenly, which took the short ones (passed, pass@k, labels) down to nothing.
ID_OVERFLOW: Final = "fold"
#: Task rows of the per-task table at most: a benchmark of 100,000 tasks prints its
#: first ones and a count of the rest (``--json``, the viewer and ``show`` give them).
TASK_ROWS = 100


def metric_columns(report: BenchmarkReport) -> list[tuple[Metric, int]]:
    """(metric, k) of each metric column, metric by metric (pass^1 is pass@1, so pass^k
    starts at k = 2: `Metric.first_table_k`)."""
    return [(m, k) for m in report.metrics for k in m.table_ks(report.k_values)]


def metrics_note(report: BenchmarkReport, columns: list[tuple[Metric, int]]) -> str:
    """`` (pass^k: all k pass)``: what each shown metric but the first means."""
    shown = dict.fromkeys(m for m, _ in columns if m != report.metrics[0])
    notes = "; ".join(f"{m.name}: {m.description}" for m in shown)
    return f" ({notes})" if notes else ""


def report_table(report: BenchmarkReport) -> Table:
    """One row per task (task, model, env, passed/n, pass@k..., pass^k...), then the mean."""
    columns = metric_columns(report)
    ks = sorted({k for _, k in columns})
    counted = dict.fromkeys(ks, 0)
    for _, _, n, _, _ in task_rows(report.tasks):
        for k in ks:
            counted[k] += n >= k
    label, note = mean_label(len(report.tasks), [(None, counted)])
    table = Table(
        title=f"{report.benchmark_id}: {report.metrics[0].name} over "
        f"{report.trials_per_task} trials per task" + metrics_note(report, columns),
        title_justify="left",
        caption=_caption(report, note),
        caption_justify="left",
    )
    table.add_column("task", overflow=ID_OVERFLOW)
    table.add_column("model", overflow=ID_OVERFLOW)
    table.add_column("env", overflow=ID_OVERFLOW)
    table.add_column("passed", justify="right")
    for metric, k in columns:
        table.add_column(metric.label(k), justify="right")
    passed = trials = 0
    for shown, (task_id, _, n, c, _) in enumerate(task_rows(report.tasks)):
        passed += c
        trials += n
        if shown >= TASK_ROWS:
            continue
        task = report.tasks[task_id]
        values = task.values
        table.add_row(
            task_id + (" *" if task.added_by_dependencies else ""),
            task.model or "-",
            task.environment_id,
            f"{task.passed}/{n}",
            *(_score(values.get(m.name, {}).get(k)) for m, k in columns),
        )
    if len(report.tasks) > TASK_ROWS:
        more = len(report.tasks) - TASK_ROWS
        table.add_row(Text(f"… {more:,} more tasks (--json lists every one)", style="dim"))
    table.add_section()
    table.add_row(
        Text(label, style="bold"),
        "",
        "",
        f"{passed}/{trials}",
        *(Text(_score(report.means.get(m.name, {}).get(k)), style="bold") for m, k in columns),
    )
    return table


def scores_table(report: BenchmarkReport) -> Table | None:
    """Each mean over tasks with its 95% interval, one row per metric: over every task,
    then each model of a run over several models (None if no trial finished)."""
    if not report.scores.tasks:
        return None
    columns: list[tuple[str, Scores]] = [("all", report.scores)]
    if len(report.scores_by_model) > 1:
        columns += list(report.scores_by_model.items())
    table = Table(
        title="means over tasks with 95% intervals (bootstrap over tasks)",
        title_justify="left",
    )
    table.add_column("")
    for name, scores in columns:
        counted = max(scores.tasks.values(), default=0)
        table.add_column(Text(f"{name} ({counted:,} tasks)"), justify="right", overflow=ID_OVERFLOW)
    for metric, k in metric_columns(report):
        table.add_row(
            metric.label(k),
            *(_over(s, metric.name, k) for _, s in columns),
        )
    return table


def _over(scores: Scores, name: str, k: int) -> str:
    """A mean at k with its interval, and the tasks it is over where they are fewer
    than its column's (an interrupted run's tasks with fewer than k finished trials)."""
    text = estimate(scores.estimates.get(name, {}).get(k))
    counted = scores.tasks.get(k)
    if counted is not None and counted < max(scores.tasks.values()):
        text += f" · {counted:,} task{'' if counted == 1 else 's'}"
    return text


def named_scores_table(report: BenchmarkReport) -> Table | None:
    """Each named score's mean over the tasks that have it with its 95% interval, one
    row per score: over every task, then each model of a run over several models
    (None without named scores)."""
    overall = report.named_scores
    if not overall:
        return None
    columns: list[tuple[str, dict[str, NamedScore]]] = [("all", overall)]
    by_model = report.named_scores_by_model
    if len(by_model) > 1:
        columns += list(by_model.items())
    table = Table(
        title="named scores: means over the tasks that have them with 95% intervals "
        "(bootstrap over tasks) · tasks",
        title_justify="left",
    )
    table.add_column("")
    for name, _ in columns:
        table.add_column(Text(name), justify="right", overflow=ID_OVERFLOW)
    for name in overall:
        cells = []
        for _, scores in columns:
            found = scores.get(name)
            cells.append("-" if found is None else f"{estimate(found.estimate)} · {found.tasks:,}")
        table.add_row(name, *cells)
    return table


def estimate(value: Estimate | None) -> str:
    """``0.52 [0.45, 0.60]``; ``-`` for none."""
    if value is None:
        return "-"
    return f"{value.value:.2f} [{value.low:.2f}, {value.high:.2f}]"


def report_summary(
    report: BenchmarkReport, json_path: Path | None, *, rescore: bool = False, live: bool = False
) -> Table:
    """Counts by status, usage, wall time and where the JSON report is (``rescore``: the
    report of a rescore, whose trials not scored again were kept, not resumed; ``live``:
    the summary of the run that just ended, not a report read back later)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    # Folded, never cut at the console's edge: a long report path or benchmark id in
    # the command that goes on is copied from here.
    grid.add_column(overflow=ID_OVERFLOW)
    resume = f"--benchmark-id {shlex.quote(report.benchmark_id)}"
    if report.stopped is not None:  # why first: the rest of the summary follows from it
        grid.add_row("stopped", Text(report.stopped, style="bold yellow"))
        grid.add_row("to go on", Text(stop_advice(report.stopped, resume), style="bold yellow"))
    counts = [f"{status} {n}" for status, n in report.counts.items() if n]
    grid.add_row("trials", " · ".join(counts) or "none")
    retries = report.retries
    if retries:
        grid.add_row(
            "retried",
            " · ".join(f"{status} {n}" for status, n in retries.items())
            + " (failed attempts given another, by how their trial ended)",
        )
    if not report.complete:
        text = f"incomplete: {report.finished:,} of {report.total:,} trials finished"
        if report.stopped is None:  # else "to go on" says how
            text += (
                f"; run the benchmark again with --benchmark-id {report.benchmark_id!r} to "
                "resume (finished trials are kept)"
            )
        grid.add_row("finished", Text(text, style="bold yellow"))
    usage = report.usage
    if usage:
        grid.add_row(
            "usage",
            f"{usage.input_tokens:,} input + {usage.output_tokens:,} output tokens"
            + (f" · {format_cost(usage.cost)}" if usage.cost else ""),
        )
    for model, counted in report.model_calls.items():  # calls, failed tries, waits
        grid.add_row("model calls", Text(calls_line(model, counted)))
    budgets = budget_line(report)
    if budgets:
        grid.add_row("budgets", budgets)
    # The same figures in a run's summary and in `corral report` (see BenchmarkReport).
    time = time_line(report, live=live)
    if report.resumed:
        time += f" · {report.resumed} trials " + (
            "kept as scored (not scored again)" if rescore else "reused from an earlier run"
        )
    grid.add_row("time", time)
    if report.tags or report.note:
        tags = " ".join(f"#{t}" for t in report.tags)
        grid.add_row("run", Text(" · ".join(x for x in (tags, report.note or "") if x)))
    if report.provenance:
        grid.add_row("from", shown_provenance(report.provenance))
    if report.generation:
        grid.add_row("models", Text(shown_generation(report.generation)))
    if json_path is not None:
        grid.add_row("report", str(json_path))
    return grid


def time_line(report: BenchmarkReport, *, live: bool = False) -> str:
    """The run's own time (this run's, ``live``, else the last run's) and the span of the
    recorded work, which covers every earlier run of the benchmark too when trials were
    resumed."""
    span = f"{report.wall_seconds:.1f} s from first to last commit"
    if report.resumed or "run_seconds" not in report.timings:
        span += " over every run of this benchmark"
    run_seconds = report.timings.get("run_seconds")
    if run_seconds is None:
        return span
    return f"{'this' if live else 'last'} run {run_seconds:.1f} s · {span}"


def stop_advice(reason: str, resume: str) -> str:
    """What to change after a run stopped for ``reason`` (`BenchmarkReport.stopped`),
    in the CLI's flags; ``resume`` is the flag that names the benchmark."""
    if reason.startswith("fail_on_error"):
        return (
            f"fix what errored (the errors table above) or give a higher --fail-on-error, then run "
            f"again with {resume} to resume (finished trials are kept)"
        )
    if reason.startswith("run_cost_limit"):
        return f"run again with a higher --run-cost-limit and {resume} to continue"
    return f"run again with {resume} to resume"


def budget_line(report: BenchmarkReport) -> str:
    """Spend against budgets: each run-wide budget with the trials it ended, budgets of
    tasks' own that ended trials, and the working time of the finished trials."""
    budgets, limited = report.budgets, report.limited
    parts = []
    for name, limit in budgets.items():
        if name == "run_cost_limit":
            parts.append(f"run_cost_limit {limit:g} (these trials cost {report.usage.cost:.4g})")
        else:
            parts.append(f"{name} {limit:g} per trial: ended {limited.get(name, 0)}")
    parts += [f"{name}: ended {n}" for name, n in sorted(limited.items()) if name not in budgets]
    if parts and report.working_seconds:
        parts.append(f"{report.working_seconds:.1f} s worked")
    return " · ".join(parts)


def models_table(report: BenchmarkReport) -> Table | None:
    """For a several-models run: one row per task, each model's passed/n, the first
    metric (pass@k) at every k and each other metric (pass^k) at the largest k side by
    side (every pass^k of each model is in `scores_table` and the JSON); tasks the
    dependency closure added are marked ``*``, as in `report_table`."""
    models = list(report.means_by_model.get(report.metrics[0].name, {}))
    suffixes = tuple(f"@{m}" for m in models)
    if len(models) < 2 or not all(t.endswith(suffixes) for t in report.tasks):
        return None
    first = report.metrics[0]
    shown = [(m, k) for m in report.metrics for k in m.table_ks(report.k_values)[-1:]]
    columns = [(first, k) for k in first.table_ks(report.k_values)] + shown[1:]
    rows: dict[str, dict[str, TaskReport]] = {}
    for task_id, task in report.tasks.items():
        # By the task's model, not the id's last "@": a model's name may hold one.
        model = task.model or task_id.rpartition("@")[2]
        rows.setdefault(task_id.removesuffix(f"@{model}"), {})[model] = task
    ks = sorted({k for _, k in columns})
    counted = {m: dict.fromkeys(ks, 0) for m in models}
    for by in rows.values():
        for m, of_model in counted.items():
            found = by.get(m)
            for k in ks:
                of_model[k] += found is not None and len(found.trials) >= k
    label, note = mean_label(len(rows), counted.items())
    table = Table(
        title=f"{first.name} by model" + metrics_note(report, columns),
        title_justify="left",
        caption=_caption(report, note),
        caption_justify="left",
    )
    table.add_column("task", overflow=ID_OVERFLOW)
    for model in models:
        table.add_column(f"{model}\npassed", justify="right", overflow=ID_OVERFLOW)
        for metric, k in columns:
            table.add_column(f"{model}\n{metric.label(k)}", justify="right", overflow=ID_OVERFLOW)
    totals = {m: [0, 0] for m in models}
    for row, (base, by) in enumerate(rows.items()):
        cells: list[RenderableType] = []
        for m in models:
            one = by.get(m)
            if one is None:
                cells += ["-"] * (1 + len(columns))
                continue
            totals[m][0] += one.passed
            totals[m][1] += len(one.trials)
            cells.append(f"{one.passed}/{len(one.trials)}")
            if row >= TASK_ROWS:  # counted in the totals, not shown
                continue
            values = one.values
            cells += [_score(values.get(metric.name, {}).get(k)) for metric, k in columns]
        if row >= TASK_ROWS:
            continue
        added = any(t.added_by_dependencies for t in by.values())
        table.add_row(base + (" *" if added else ""), *cells)
    if len(rows) > TASK_ROWS:
        more = len(rows) - TASK_ROWS
        table.add_row(Text(f"… {more:,} more tasks (--json lists every one)", style="dim"))
    table.add_section()
    means: list[RenderableType] = []
    for m in models:
        means.append(f"{totals[m][0]}/{totals[m][1]}")
        means += [
            Text(_score(report.means_by_model.get(metric.name, {}).get(m, {}).get(k)), style="bold")
            for metric, k in columns
        ]
    table.add_row(Text(label, style="bold"), *means)
    return table


def _caption(report: BenchmarkReport, note: str | None) -> str | None:
    lines = ["* added by dependency closure"] if report.added_by_dependencies else []
    return "\n".join([*lines, *([note] if note else [])]) or None


def errors_table(report: BenchmarkReport, store: str | None = None) -> Table | None:
    """Trial errors, failed evaluations, then timeouts, max_iterations and over-budget
    trials, each apart: each message with its count and up to three example trials
    (``corral show ID TASK TRIAL`` prints one in full; with ``--store`` when ``store``
    is not the default, so the command runs as printed)."""
    sections = [
        ("trial errors", report.errors),
        ("evaluation failures", report.evaluation_errors),
        *report.endings.items(),
    ]
    examples = [g.examples[0] for _, groups in sections for g in groups[:1]]
    if not examples:
        return None
    task, _, trial = examples[0].rpartition("#")
    # A PostgreSQL password is masked, as everywhere the CLI shows a store's address.
    where = [] if store is None or store == DEFAULT_STORE else ["--store", shown_address(store)]
    show = shlex.join(["corral", "show", report.benchmark_id, task, trial, *where])
    table = Table(
        title="errors" if not report.endings else "errors and trials that ended without Final",
        title_justify="left",
        caption=f"a trial's history and traceback: {show}",
        caption_justify="left",
    )
    table.add_column("count", justify="right")
    table.add_column("message", overflow="fold")
    table.add_column("examples", overflow=ID_OVERFLOW)
    for title, groups in sections:
        if not groups:
            continue
        table.add_row("", Text(f"{title}: {sum(g.count for g in groups):,}", style="bold"), "")
        for group in groups:
            table.add_row(str(group.count), group_message(group), ", ".join(group.examples))
        table.add_section()
    return table


def group_message(group: ErrorGroup) -> str:
    """A group's first message, cut to `MESSAGE_WIDTH`, and how many distinct messages it
    folds (the count column says how many trials)."""
    text = " ".join(group.message.split())
    if len(text) > MESSAGE_WIDTH:
        text = text[: MESSAGE_WIDTH - 1] + "…"
    if group.variants > 1:
        text += f" ({group.variants} distinct messages; numbers or ids differ)"
    return text


def report_renderables(
    report: BenchmarkReport,
    json_path: Path | None,
    *,
    rescore: bool = False,
    live: bool = False,
    store: str | None = None,
) -> list[RenderableType]:
    table = models_table(report)
    out: list[RenderableType] = [table if table is not None else report_table(report)]
    for means in (scores_table(report), named_scores_table(report)):
        if means is not None:
            out.append(means)
    errors = errors_table(report, store)
    if errors is not None:
        out.append(errors)
    out.append(report_summary(report, json_path, rescore=rescore, live=live))
    return out


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
