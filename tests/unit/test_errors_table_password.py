"""The errors table's `corral show ... --store` never prints a PostgreSQL password
(as `corral list` masks it: `shown_address`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from corral.cli import main

from .test_cli_wording import BENCH


def test_the_errors_table_masks_the_stores_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pg_dsn: str
) -> None:
    # The server trusts 127.0.0.1: any password connects, and must not be shown.
    store = pg_dsn.replace("postgresql://postgres@", "postgresql://postgres:s3cr3t@", 1)
    assert "s3cr3t" in store
    bench = tmp_path / "mathbench.py"
    bench.write_text(BENCH)
    monkeypatch.chdir(tmp_path)
    ran = CliRunner().invoke(main, ["run", str(bench), "--store", store])
    assert ran.exit_code == 1, ran.output  # task "bad" errors: the errors table is shown
    assert "corral show" in ran.output
    assert "s3cr3t" not in ran.output, ran.output
    reported = CliRunner().invoke(main, ["report", "mathbench", "--store", store])
    assert "corral show" in reported.output
    assert "s3cr3t" not in reported.output, reported.output
