"""Costs are written with significant digits, the same in the CLI and the viewer."""

from __future__ import annotations

import io
from dataclasses import replace

import anyio
import pytest
from rich.console import Console

from corral import BenchmarkTaskMetadata, CorralRunner, Final, MemoryStore, Usage
from corral._costs import format_cost
from corral.cli._tables import report_summary
from corral.testing import FakeEnvironment, ScriptedAgent


@pytest.mark.parametrize(
    ("cost", "text"),
    [
        (0.0, "$0"),
        (0.000047, "$0.000047"),
        (0.0000473219, "$0.0000473"),
        (0.0123456, "$0.0123"),
        (0.1, "$0.10"),
        (0.004999, "$0.005"),
        (0.99999, "$1.00"),
        (1.5, "$1.50"),
        (1234.567, "$1,234.57"),
        (-0.00012, "-$0.00012"),
    ],
)
def test_format_cost_keeps_significant_digits(cost: float, text: str) -> None:
    assert format_cost(cost) == text


def test_the_cli_usage_line_shows_a_tiny_cost() -> None:
    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(lambda session: Final(1))},
        {"e": FakeEnvironment()},
        store=MemoryStore(),
    )
    report = anyio.run(runner.run, "b")
    report = replace(report, usage=Usage(10, 5, 0.000047))
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(report_summary(report, None))
    text = console.export_text()
    assert "$0.000047" in text and "0.0000 " not in text
