"""The numbers the live progress prints equal the summary's and the report's."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

from click.testing import CliRunner

from corral.cli import main

# One trial fails twice and passes on its third attempt: 2 retried attempts, 1 trial.
RETRIED = textwrap.dedent(
    """
    import corral

    class Agent:
        async def act(self, session):
            if session.task_id == "flaky" and session.attempt < 2:
                raise RuntimeError("transient")
            return corral.Final(1)

    class Env:
        async def setup(self, session):
            return None

        async def execute(self, action, session):
            return corral.ToolEffect(None)

        async def evaluate(self, trial):
            return corral.Evaluation(1.0, True)

    tasks = {t: corral.BenchmarkTaskMetadata("a", "e") for t in ("flaky", "ok")}
    benchmark = corral.Benchmark(
        tasks, {"a": Agent()}, {"e": Env()},
        run_defaults={"trials_per_task": 1, "k_values": (1,), "max_retries": 3,
                      "backoff_base": 0.0, "backoff_cap": 0.0},
    )
    """
)


def test_progress_retried_count_equals_the_summary_and_report(tmp_path: Path) -> None:
    bench = tmp_path / "retried.py"
    bench.write_text(RETRIED)
    store = tmp_path / "s.db"
    result = CliRunner().invoke(
        main,
        ["run", str(bench), "--store", str(store), "--progress", "plain"],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "reports" / "retried.json").read_text())
    assert report["retries"] == {"completed": 2}  # two failed attempts given another
    last = [line for line in result.output.splitlines() if "this run" in line][0]
    shown = re.search(r"retried (\d+)", last)
    summary = re.search(r"^retried\s+completed (\d+)", result.output, re.M)
    assert summary is not None and int(summary.group(1)) == 2
    # The live line uses the same word for the same thing: attempts given another.
    assert shown is not None and int(shown.group(1)) == sum(report["retries"].values()), last
