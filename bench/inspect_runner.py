"""The throughput workload on Inspect AI (an optional extra: ``pip install -e '.[bench]'``).

N samples x ``epochs=4``; the solver awaits ``sleep(L)`` and then makes one
``generate`` call with ``tool_calls="single"``: Inspect's built-in
``mockllm/model`` (no network) proposes one call of the ``step`` tool, which
Inspect executes. That is the cheapest setup that still takes one model turn
and one tool step per sample (letting the model answer again after the tool,
``tool_calls="loop"``, costs about 25% more per sample); the scorer is
trivial. ``max_samples`` and ``max_connections`` are both P.

Logging: ``"default"`` is Inspect's default (an ``.eval`` log with every
sample, realtime events); ``"light"`` is the lightest it allows (no samples in
the log, no realtime events, no model API records, level ``error``, no score
display, no control server). Display is off in both.
"""

from __future__ import annotations

import asyncio
import tempfile
from typing import Any

from inspect_ai import Task, eval
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.model import ChatMessage, ChatMessageTool, ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import Generate, Solver, TaskState, solver, use_tools
from inspect_ai.tool import Tool, tool

LOGGING: dict[str, dict[str, Any]] = {
    "default": {},
    "light": {
        "log_samples": False,
        "log_realtime": False,
        "log_model_api": False,
        "log_level": "error",
        "log_level_transcript": "error",
        "score_display": False,
        "ctl_server": False,
    },
}


@tool
def step() -> Tool:
    async def execute(n: int) -> str:
        """Take one step.

        Args:
            n: How far to step.
        """
        return str(n)

    return execute


@solver
def sleep_then_step(latency: float) -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await asyncio.sleep(latency)
        return await generate(state, tool_calls="single")

    return solve


@scorer(metrics=[accuracy()])
def trivial() -> Scorer:
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=1)

    return score


def _mock_output(
    input: list[ChatMessage], tools: Any, tool_choice: Any, config: Any
) -> ModelOutput:
    if isinstance(input[-1], ChatMessageTool):
        out = ModelOutput.from_content("mockllm", "1")
    else:
        out = ModelOutput.for_tool_call("mockllm", "step", {"n": 1}, tool_call_id="call")
    # With usage set, mockllm does not count tokens with tiktoken (which downloads).
    out.usage = ModelUsage(input_tokens=1, output_tokens=1, total_tokens=2)
    return out


def build(tasks: int, latency: float) -> tuple[Task, Any]:
    """The task (N samples) and the mock model, built before the clock starts."""
    task = Task(
        dataset=MemoryDataset([Sample(input="step once", target="1", id=i) for i in range(tasks)]),
        solver=[use_tools(step()), sleep_then_step(latency)],
        scorer=trivial(),
    )
    return task, get_model("mockllm/model", custom_outputs=_mock_output)


def run(task: Task, model: Any, *, parallel: int, epochs: int, logging: str) -> tuple[int, int]:
    """Run the eval; return (samples scored, samples with score 1)."""
    with tempfile.TemporaryDirectory() as log_dir:
        logs = eval(
            task,
            model=model,
            epochs=epochs,
            max_samples=parallel,
            max_connections=parallel,
            display="none",
            log_dir=log_dir,
            **LOGGING[logging],
        )
    log = logs[0]
    if log.status != "success" or log.results is None:
        raise RuntimeError(f"Inspect eval ended {log.status}: {str(log.error)[:500]}")
    done = log.results.completed_samples
    accuracy_value = log.results.scores[0].metrics["accuracy"].value
    return done, round(done * float(accuracy_value))
