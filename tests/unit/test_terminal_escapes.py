"""Untrusted text on the terminal: control characters from agents, environments and
model servers are printed escaped, and rich markup in them prints literally, in a
run's summary, `corral report` and `corral show`."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from rich.table import Table
from rich.text import Text

from corral._terminal import SafeConsole, clean
from corral.cli import main

CLIPBOARD = "\x1b]52;c;cHduZWQ=\x07"
CLEAR = "\x1b[2J"
TITLE = "\x1b]0;TITLE\x07"
MARKUP = "[bold red]x[/] [link=https://evil.example]click[/link]"

BENCH = textwrap.dedent(
    """
    import corral

    CLIPBOARD, CLEAR, TITLE, MARKUP = {payloads!r}

    class Agent:
        async def act(self, session):
            if session.task_id == "boom":
                raise RuntimeError(CLIPBOARD + " " + MARKUP + " " + CLEAR)
            if not session.steps:
                return corral.Action(TITLE + "tool", {{"v": CLEAR + "\\u202e" + MARKUP}})
            return corral.Final(MARKUP + CLIPBOARD + "\\x9b31m")

    class Env:
        async def setup(self, session):
            return {{"n": CLEAR}}

        async def execute(self, action, session):
            return corral.ToolEffect(TITLE + "seen\\r", {{"n": CLIPBOARD}})

        async def evaluate(self, trial):
            return corral.Evaluation(0.0, False, {{"why": TITLE + MARKUP}})

    benchmark = corral.Benchmark(
        {{t: corral.BenchmarkTaskMetadata("a", "e") for t in ("evil", "boom")}},
        {{"a": Agent()}},
        {{"e": Env()}},
        run_defaults={{"max_retries": 0}},
    )
    """
)

RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


@pytest.fixture
def ran(tmp_path: Path) -> tuple[Path, Result]:
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH.format(payloads=(CLIPBOARD, CLEAR, TITLE, MARKUP)))
    store = tmp_path / "store.db"
    result = _invoke("run", bench, "--store", store, "--benchmark-id", "b", "--no-progress")
    return store, result


def _invoke(*args: object) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _assert_escaped(output: str) -> None:
    for raw in RAW:
        assert raw not in output, (raw, output)


def test_a_runs_error_table_escapes_control_characters_and_markup(
    ran: tuple[Path, Result],
) -> None:
    _, result = ran
    assert result.exit_code == 1, result.output
    _assert_escaped(result.output)
    assert "\\x1b]52;c;cHduZWQ=\\x07" in result.output
    assert "[link=https://evil.example]click[/link]" in result.output


def test_report_escapes_control_characters_and_markup(ran: tuple[Path, Result]) -> None:
    store, _ = ran
    output = _invoke("report", "b", "--store", store).output
    _assert_escaped(output)
    assert "\\x1b]52;c;cHduZWQ=\\x07" in output and "\\x1b[2J" in output
    assert "[bold red]x[/]" in output


@pytest.mark.parametrize("task", ["evil", "boom"])
def test_show_escapes_control_characters_and_markup(ran: tuple[Path, Result], task: str) -> None:
    store, _ = ran
    output = _invoke("show", "b", task, "0", "--store", store).output
    _assert_escaped(output)
    assert "[bold red]x[/]" in output and "[link=https://evil.example]" in output
    if task == "evil":  # the tool's name, its argument, observation, state and output
        assert "\\x1b]0;TITLE\\x07tool(" in output
        assert "\\u202e" in output and "seen\\r" in output and "\\x9b31m" in output
    else:  # the error, in the history and in full with its traceback
        assert output.count("\\x1b]52;c;cHduZWQ=\\x07") >= 2


def test_on_a_terminal_only_rich_s_own_sequences_are_written() -> None:
    console = SafeConsole(force_terminal=True, color_system="truecolor", width=200)
    with console.capture() as captured:
        console.print(CLIPBOARD + MARKUP + CLEAR, style="bold", highlight=False)
        console.print("[bold]ours[/]", markup=True)
    output = captured.get()
    for sequence in (CLIPBOARD, CLEAR, "\x1b]52", "\x1b]8;"):  # \x1b]8; would be a link
        assert sequence not in output
    assert "\x1b[1m" in output  # rich's own bold
    assert MARKUP in output and "[bold]ours" not in output


def test_clean_keeps_layout_and_escapes_the_rest() -> None:
    assert clean("a\tb\nc") == "a\tb\nc"
    assert clean("a\tb\nc", one_line=True) == "a\\x09b\\x0ac"
    assert clean("\x00\x7f\x85\u2028\u2067é") == "\\x00\\x7f\\x85\\u2028\\u2067é"


def test_an_error_line_escapes_control_characters(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(f"raise RuntimeError({CLEAR + TITLE!r})\n")
    result = _invoke("run", bench, "--store", tmp_path / "store.db", "--no-progress")
    assert result.exit_code == 2, result.output
    _assert_escaped(result.stderr)
    assert "\\x1b[2J\\x1b]0;TITLE\\x07" in result.stderr.splitlines()[-1]


def test_escaped_text_is_laid_out_whole_not_cropped() -> None:
    """Text with control characters is escaped before it is wrapped: the escapes are
    wider than the characters, and a line measured without them would be cropped."""
    message = "E" + CLEAR * 6 + "END"
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim")
    grid.add_column(overflow="fold")
    grid.add_row("error", Text.assemble((message, "bold red"), "  (seq 3)"))
    console = SafeConsole(width=30, force_terminal=False)
    with console.capture() as captured:
        console.print(grid)
    lines = captured.get().splitlines()
    assert all(len(line) <= 30 for line in lines), lines
    assert "".join(line[6:].strip() for line in lines) == clean(message) + "(seq 3)"


def test_show_escapes_bel_cr_and_bs_in_the_error_and_its_traceback(tmp_path: Path) -> None:
    """rich's Text would drop them silently; they read as escapes, as elsewhere."""
    bench = tmp_path / "bench.py"
    bench.write_text(
        BENCH.format(payloads=("bell\x07 cr\r bs\x08 end", "", "", "")).replace(
            '("evil", "boom")', '("boom",)'
        )
    )
    store = tmp_path / "store.db"
    _invoke("run", bench, "--store", store, "--benchmark-id", "b", "--no-progress")
    output = _invoke("show", "b", "boom", "0", "--store", store).output
    _assert_escaped(output)
    # The outcome, the terminal's line, the error section and its traceback's last line.
    assert output.count("bell\\x07 cr\\x0d bs\\x08 end") == 4, output
