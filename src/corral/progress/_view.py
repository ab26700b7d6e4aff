"""What the live display shows, as a rich renderable built from one snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from rich.console import Group, RenderableType
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from .._budget import cost_reached
from .._concurrency import SUBPROCESSES, ScopeStatistics
from ..scheduler import KeyedLimit, LimitPhase, Limits, Statistics
from ._per_task import held_by_task
from ._tally import Tally

_BAR_WIDTH = 24


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one frame shows; built at render time, never per commit."""

    benchmark_id: str
    elapsed: float
    statistics: Statistics
    limits: Limits
    tally: Tally
    resumed: int
    eta: float | None
    scopes: Mapping[str, ScopeStatistics] = field(default_factory=dict)
    #: The limit whose work left sets the ETA (None: the run's own rate does).
    binding: str | None = None
    #: A Ctrl-C asked the run to stop.
    stopping: bool = False
    #: The run-wide budgets, and (with a ``run_cost_limit``) the benchmark's cost so far.
    budgets: Mapping[str, float] = field(default_factory=dict)
    spent: float = 0.0


def queue_reasons(statistics: Statistics, limits: Limits) -> list[str]:
    """Why queued trials are not running: every limit that is full while some wait.

    Empty when none waits, or when none is full (they are about to start).
    """
    s = statistics
    if not s.ready:
        return []
    reasons = []
    if s.executing >= limits.max_parallel:
        reasons.append(f"max_parallel {s.executing}/{limits.max_parallel}")
    if s.executing + s.evaluating >= limits.max_parallel_total:
        reasons.append(
            f"max_parallel_total {s.executing + s.evaluating}/{limits.max_parallel_total}"
        )
    for limit in limits.declarations:
        if limit.phase is not LimitPhase.EXECUTION:  # queued trials wait to execute
            continue
        configured, effective = limits.keyed(limit), _effective(s, limit)
        caps = effective or configured
        for key, used in s.used(limit).items():
            cap = caps.get(key, limits.max_parallel)
            # An adaptive limit counts every key: at max_parallel, max_parallel says it.
            if used >= cap and not (limit.adaptive and used >= limits.max_parallel):
                # A cap rate limits cut (in use may be above it, as trials finish).
                full = configured.get(key, limits.max_parallel)
                cut = f" (rate-limited from {full})" if key in effective and cap < full else ""
                reasons.append(f"{limit.label} {key} {used}/{cap}{cut}")
    return reasons


def utilisation(
    statistics: Statistics,
    limits: Limits,
    scopes: Mapping[str, ScopeStatistics] | None = None,
) -> list[tuple[str, int, int]]:
    """(label, used, limit) for every limit the run has, global ones first, then the
    run's named concurrency scopes. A key throttled by rate limits shows its
    effective limit."""
    s = statistics
    rows = [
        ("executions", s.executing, limits.max_parallel),
        ("evaluations", s.evaluating, limits.max_parallel_evaluations),
        ("executions + evaluations", s.executing + s.evaluating, limits.max_parallel_total),
    ]
    for limit in limits.declarations:
        used, configured = s.used(limit), limits.keyed(limit)
        effective = _effective(s, limit)
        for key, cap in configured.items():
            now = effective.get(key, cap)
            label = f"{limit.label} {key}"
            if now < cap:
                rows.append((f"{label} (rate-limited: {now} of {cap})", used.get(key, 0), now))
            else:
                rows.append((label, used.get(key, 0), cap))
        for key, now in effective.items():
            if key not in configured and now < limits.max_parallel:
                rows.append((f"{limit.label} {key} (rate-limited)", used.get(key, 0), now))
    for name, st in (scopes or {}).items():
        label = "subprocesses" if name == SUBPROCESSES else f"scope {name}"
        rows.append(
            (label + (f" ({st.waiting} waiting)" if st.waiting else ""), st.in_use, st.limit)
        )
    return rows


def _effective(statistics: Statistics, limit: KeyedLimit) -> Mapping[str, int]:
    """The effective caps of an adaptive limit's keys (none for another limit)."""
    return statistics.effective(limit) if limit.adaptive else {}


def render(snapshot: Snapshot) -> RenderableType:
    s = snapshot.statistics
    tally = snapshot.tally
    # Not queued yet: waiting for a parent's trial, (reflective) the task's previous
    # trial, or the task's one queued round to start.
    waiting = max(
        0, s.total - s.finished - s.executing - s.evaluating - s.ready - s.awaiting_evaluation
    )
    eta = ""
    if snapshot.eta is not None:
        eta = f"  ETA {duration(snapshot.eta)}"
        if snapshot.binding and snapshot.eta > 0:
            eta += f" (bound by {snapshot.binding})"
    header = Text.assemble(
        ("corral ", "bold cyan"),
        (snapshot.benchmark_id, "bold"),
        f"  {snapshot.elapsed:.1f} s",
        eta,
    )
    # Durable trials only (the scheduler's ``finished`` counts those still on their way
    # to the store).
    done = snapshot.resumed + tally.finished
    bar = Table.grid(padding=(0, 1))
    bar.add_row(
        ProgressBar(total=max(s.total, 1), completed=done, width=40),
        Text(f"{done}/{s.total} trials ({done_share(done, s.total)})"),
    )
    reasons = queue_reasons(s, snapshot.limits)
    counts = Text(
        f"queued {s.ready}"
        + (f" (held by {', '.join(reasons)})" if reasons else "")
        + f" · running {s.executing} · to evaluate {s.awaiting_evaluation} · "
        f"evaluating {s.evaluating} · done {done} · waiting {waiting}"
        + (f" (held by {held})" if (held := held_by_task(s, snapshot.limits)) else "")
        + (f" · rate-limited {s.deferred}" if s.deferred else "")
        + (f" ({snapshot.resumed} resumed)" if snapshot.resumed else "")
    )
    lines: list[RenderableType] = [header]
    if snapshot.stopping:
        lines.append(
            Text(
                f"stopping: {done:,} of {s.total:,} trials done; "
                "running trials are "
                "being cancelled (Ctrl-C again to exit at once)",
                style="bold yellow",
            )
        )
    lines += [bar, counts, _outcomes(tally)]
    if snapshot.budgets or tally.limits:
        lines.append(_budgets(snapshot))
    if len(tally.models) > 1:
        lines.append(_by_model(tally))
    lines.append(_limits(s, snapshot.limits, snapshot.scopes))
    return Group(*lines)


def _by_model(tally: Tally) -> Text:
    parts = []
    for model, lane in sorted(tally.models.items()):
        rate = lane.pass_rate
        shown = "-" if rate is None else f"{rate:.2f} ({lane.passed}/{lane.finished})"
        parts.append(f"{model} {shown}")
    return Text("pass@1 by model: " + " · ".join(parts))


def _outcomes(tally: Tally) -> Text:
    return Text(" · ".join(outcomes(tally)), style="green" if not tally.errors else "yellow")


def outcomes(tally: Tally) -> list[str]:
    """pass@1 so far, errors, other endings, retries, tokens and cost, as short phrases."""
    rate = tally.pass_rate
    passed, finished = tally.pass_counts
    so_far = "-" if rate is None else f"{rate:.2f} ({passed}/{finished})"
    parts = ["pass@1 so far " + so_far, f"errors {tally.errors}"]
    for status in ("max_iterations", "timeout", "unreachable", "limit"):
        if tally.statuses.get(status):
            parts.append(f"{status} {tally.statuses[status]}")
    if tally.retried:
        parts.append(f"retried {tally.retried}")
    if tally.input_tokens or tally.output_tokens:
        parts.append(f"tokens {_count(tally.input_tokens)} in / {_count(tally.output_tokens)} out")
    if tally.cost:
        parts.append(f"${tally.cost:.4f}")
    return parts


def _budgets(snapshot: Snapshot) -> Text:
    """Spend against budgets: the run's cost against ``run_cost_limit``, the per-trial
    budgets, and how many trials each one ended."""
    budgets, tally = snapshot.budgets, snapshot.tally
    parts = []
    if "run_cost_limit" in budgets:
        parts.append(f"run cost {snapshot.spent:.4g} of {budgets['run_cost_limit']:g}")
    for name, unit in (
        ("token_limit", " tokens"),
        ("cost_limit", ""),
        ("working_time_limit", " s"),
    ):
        if name in budgets:
            ended = tally.limits.get(name, 0)
            parts.append(f"{name} {budgets[name]:g}{unit} per trial (ended {ended})")
    for name, ended in sorted(tally.limits.items()):
        if name not in budgets:  # a task's own budget
            parts.append(f"{name} ended {ended}")
    full = "run_cost_limit" in budgets and cost_reached(snapshot.spent, budgets["run_cost_limit"])
    return Text("budgets: " + " · ".join(parts), style="bold yellow" if full else "")


def _limits(statistics: Statistics, limits: Limits, scopes: Mapping[str, ScopeStatistics]) -> Table:
    grid = Table.grid(padding=(0, 1))
    # A label (a model id, a scope's name) folds over lines: cut at the console's edge,
    # two models alike but for their ends showed one label.
    grid.add_column(style="dim", overflow="fold")
    grid.add_column()
    grid.add_column(justify="right")
    for label, used, limit in utilisation(statistics, limits, scopes):
        full = used >= limit
        grid.add_row(
            label,
            ProgressBar(
                total=limit,
                completed=min(used, limit),
                width=_BAR_WIDTH,
                complete_style="yellow" if full else "cyan",
            ),
            Text(f"{used}/{limit}", style="bold yellow" if full else ""),
        )
    held = statistics.held_by_task if held_by_task(statistics, limits) else 0
    grid.add_row(
        "per task",
        Text(
            f"at most {limits.max_parallel_per_task} at once"
            + (f", holding {held:,} back" if held else ""),
            style="bold yellow" if held else "dim",
        ),
        "",
    )
    return grid


def done_share(done: int, total: int) -> str:
    """``99%``: the share of ``total`` done, rounded down, so that 100% means all done
    (199 of 200 is 99%, not 100%)."""
    return f"{100 * done // total if total else 100}%"


def duration(seconds: float) -> str:
    """Seconds as a person reads them: 42 s, 3 min 05 s, 2 h 10 min."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def _count(n: int) -> str:
    if n < 10_000:
        return str(n)
    if n < 10_000_000:
        return f"{n / 1000:.1f}k"
    return f"{n / 1_000_000:.1f}M"
