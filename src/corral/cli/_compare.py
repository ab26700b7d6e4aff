"""``corral compare``: two benchmarks, or two models of one, task by task."""

from __future__ import annotations

import json

import click
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .._errors import ConfigError
from .._json import finite
from ..report import BenchmarkReport, Comparison, compare
from ..report._metrics import METRICS
from ..store import CommitStore
from ._execute import make_console
from ._inspect import reading_store, rebuild_report, with_store
from ._options import store_option
from ._tables import ID_OVERFLOW, estimate

#: Task ids listed per outcome before "and N more" (``--json`` lists them all).
LISTED = 10


@click.command("compare")
@click.argument("benchmark_a")
@click.argument("benchmark_b", required=False)
@store_option
@click.option(
    "--store-b",
    default=None,
    metavar="PATH|URI",
    help="Where BENCHMARK_B is, if not in --store (a local run against a shared store).",
)
@click.option("--model", default=None, metavar="MODEL", help="Only this model's tasks, both sides.")
@click.option(
    "--models",
    nargs=2,
    default=None,
    metavar="MODEL_A MODEL_B",
    help="MODEL_A's tasks in BENCHMARK_A against MODEL_B's in BENCHMARK_B (or in "
    "BENCHMARK_A again when BENCHMARK_B is left out).",
)
@click.option("-k", "--k", "k", type=int, default=1, show_default=True, help="The k of the metric.")
@click.option(
    "--metric",
    default=METRICS[0].name,
    show_default=True,
    metavar="METRIC",
    help=", ".join(f"{m.name} ({m.description})" for m in METRICS)
    + " or score:NAME (the named score NAME of the evaluations: each task's mean over "
    "its trials that have it).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
def compare_command(
    benchmark_a: str,
    benchmark_b: str | None,
    store: str,
    store_b: str | None,
    model: str | None,
    models: tuple[str, str] | None,
    k: int,
    metric: str,
    as_json: bool,
) -> None:
    """Compare pass@k (pass^k, a named score) of BENCHMARK_B against BENCHMARK_A on the
    tasks both ran.

    Prints each side's mean over the shared tasks, the difference B - A with its
    95% paired-bootstrap interval, and the tasks B improved, regressed or tied
    on. `corral compare ID --models A B` compares two models of one run over
    several models, task by task.
    """
    if benchmark_b is None:
        if models is None:
            raise ConfigError(
                f"give a second benchmark id, or --models MODEL_A MODEL_B to compare two "
                f"models of {benchmark_a!r}"
            )
        benchmark_b = benchmark_a
    if model is not None and models is not None:
        raise ConfigError("give --model or --models, not both")
    other = benchmark_b

    second = None if store_b is None or store_b == store else reading_store(store_b)

    async def job(opened: CommitStore) -> Comparison:
        report_a = await _report(opened, benchmark_a)
        if second is not None:
            async with second.opened():
                report_b = await _report(second, other)
        elif other == benchmark_a:
            report_b = report_a
        else:
            report_b = await _report(opened, other)
        return compare(report_a, report_b, k=k, metric=metric, model=model, models=models)

    result = with_store(store, job)
    if as_json:
        click.echo(json.dumps(finite(result.to_dict()), indent=2, allow_nan=False))
        return
    make_console().print(render_comparison(result))


async def _report(store: CommitStore, benchmark_id: str) -> BenchmarkReport:
    # `compare` computes pass@k from each task's trials and checks k against each
    # side's trials per task; the report itself needs only the cheapest k.
    return await rebuild_report(store, benchmark_id, (1,))


def _name(benchmark_id: str, model: str | None) -> str:
    return benchmark_id + (f" [{model}]" if model is not None else "")


def render_comparison(c: Comparison) -> RenderableType:
    a, b = _name(c.benchmark_a, c.model_a), _name(c.benchmark_b, c.model_b)
    metric = c.metric
    table = Table(
        title=f"{metric}: B against A on {len(c.shared):,} shared tasks",
        title_justify="left",
    )
    table.add_column("")
    table.add_column(Text(f"A: {a}"), justify="right", overflow=ID_OVERFLOW)
    table.add_column(Text(f"B: {b}"), justify="right", overflow=ID_OVERFLOW)
    table.add_column("B - A", justify="right", no_wrap=True)
    difference = c.difference
    table.add_row(
        f"mean {metric}",
        estimate(c.a),
        estimate(c.b),
        f"{_signed(difference.value)} [{_signed(difference.low)}, {_signed(difference.high)}]",
    )
    if len(c.shared) < 2:
        verdict = "too few shared tasks to tell (an interval over tasks needs two)"
    elif c.significant:
        better = "better" if difference.value > 0 else "worse"
        verdict = f"B is {better} (the 95% interval excludes 0)"
    else:
        verdict = "no significant difference (the 95% interval includes 0)"
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim")
    grid.add_column(overflow="fold")
    grid.add_row("verdict", verdict)
    for label, tasks in (
        ("improved", c.improved),
        ("regressed", c.regressed),
        ("tied", c.tied),
        ("only in A", c.only_a),
        ("only in B", c.only_b),
        (f"< {c.k} trials" if c.score is None else "without it", c.incomplete),
    ):
        if tasks or label in ("improved", "regressed", "tied"):
            grid.add_row(label, Text(_listed(tasks)))
    return Group(table, grid)


def _signed(value: float) -> str:
    """``+0.012``; a value that three decimals would show as zero but is not, with two
    significant digits (``+0.00033``): the verdict says whether the interval excludes
    0, and its bounds must not seem to say otherwise."""
    text = f"{value:+.3f}"
    if value and not float(text):
        return f"{value:+.2g}"
    return text


def _listed(tasks: tuple[str, ...]) -> str:
    if not tasks:
        return "0"
    shown = ", ".join(tasks[:LISTED])
    more = f", and {len(tasks) - LISTED:,} more" if len(tasks) > LISTED else ""
    return f"{len(tasks):,}: {shown}{more}"
