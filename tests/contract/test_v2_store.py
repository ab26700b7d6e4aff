"""A store written before the history package (tests/data/v2_store, made by Corral
636b00a with make_v2_store.py) reads, reports and resumes as it did."""

from __future__ import annotations

import functools
import json
import shutil
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from corral.cli import main
from tests.data.v2_store.make_v2_store import COMMANDS, runner

V2_STORE = Path(__file__).parents[1] / "data" / "v2_store"


@pytest.fixture
def v2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "v2"
    shutil.copytree(V2_STORE, copy, ignore=shutil.ignore_patterns("expected", "*.py"))
    monkeypatch.chdir(copy)
    monkeypatch.setenv("CORRAL_STORE", "store.db")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    return copy


def _printed(name: str) -> str:
    result = CliRunner().invoke(main, list(COMMANDS[name]), catch_exceptions=False)
    return f"exit {result.exit_code}\n{result.stdout}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_list_report_and_show_print_what_they_printed(v2: Path, name: str) -> None:
    expected = (V2_STORE / "expected" / f"{name}.txt").read_text()
    assert _printed(name) == expected


def test_a_resume_reuses_every_trial_and_reports_the_same(v2: Path) -> None:
    expected = json.loads((V2_STORE / "expected" / "report-api.txt").read_text().split("\n", 1)[1])
    resume = runner(v2 / "store.db").run
    again = anyio.run(functools.partial(resume, "api", trials_per_task=2, k_values=(1, 2)))
    assert again.resumed == 14 and again.complete
    shown = json.loads(json.dumps(again.to_dict()))
    for name in ("tasks", "counts", "pass_at_k", "pass_hat_k", "usage", "errors", "endings"):
        assert shown[name] == expected[name], name
    assert _printed("list") == (V2_STORE / "expected" / "list.txt").read_text()
