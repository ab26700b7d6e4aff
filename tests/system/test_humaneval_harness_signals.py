"""HumanEval's harness passes a killed program's signal on: SIGKILL too."""

from __future__ import annotations

import pytest

from tests.system.test_humaneval import humaneval, scored

pytestmark = [pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_program_killed_by_sigkill_is_reported_as_killed() -> None:
    task = "HumanEval/0"
    bench = humaneval.benchmark("http://127.0.0.1:9/v1", api_key="", task_ids=[task])
    environment, meta = bench.environments["humaneval"], bench.tasks[task]
    killed = "    import os, signal\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    evaluation = await environment.evaluate(scored(meta, task, killed))
    assert not evaluation.passed
    assert "Invalid argument" not in evaluation.details["message"], evaluation.details
    assert evaluation.details["reason"] == "signal", evaluation.details
