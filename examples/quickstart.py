"""A benchmark file to copy: tasks, an agent, an environment, run settings.

    corral run examples/quickstart.py
    corral run examples/quickstart.py            # again: resumes, nothing runs twice
    corral run examples/quickstart.py --benchmark-id quickstart-8 --trials 8 -k 1,4
    corral report quickstart
    corral show quickstart double-it 0

Replace `QuizAgent` with your agent (call your model in `act`) and `Calculator`
with your environment (tools in `execute`, grading in `evaluate`).
"""

from __future__ import annotations

import operator
import random
from typing import Any

import corral

QUESTIONS = {
    "add": ("17 + 25", 42),
    "multiply": ("12 * 13", 156),
    "subtract": ("1000 - 1", 999),
    "divide": ("144 // 12", 12),
}
OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv}


class Calculator:
    """An environment: one `calculate` tool, and a grader with the answer key."""

    async def setup(self, session: corral.AgentSession) -> Any:
        return {"calls": 0}  # the trial's initial state, recorded as its first commit

    async def execute(
        self, action: corral.Action, session: corral.AgentSession
    ) -> corral.ToolEffect:
        if action.tool != "calculate":
            raise ValueError(f"unknown tool {action.tool!r}")
        left, op, right = str(action.arguments["expression"]).split()
        result = OPERATORS[op](int(left), int(right))
        return corral.ToolEffect(observation=result, state={"calls": session.state["calls"] + 1})

    async def evaluate(self, trial: corral.TrialRecord) -> corral.Evaluation:
        if trial.task_id == "double-it":
            expected = 2 * QUESTIONS["add"][1]
        else:
            expected = QUESTIONS[trial.task_id][1]
        passed = trial.output == expected
        return corral.Evaluation(score=float(passed), passed=passed)


class QuizAgent:
    """An agent: usually uses the calculator, sometimes answers from memory (and
    is then wrong now and again). One instance serves every trial at once, so
    it keeps nothing on ``self``."""

    async def act(self, session: corral.AgentSession) -> corral.Action | corral.Final:
        session.record_usage(input_tokens=120 + 40 * len(session.steps), output_tokens=12)
        if session.steps:  # the calculator has answered: report it
            return corral.Final(session.steps[-1].effect.observation)
        if "add" in session.inputs:  # a child task: its parent's output is an input
            return corral.Action("calculate", {"expression": f"{session.inputs['add']} * 2"})
        rng = random.Random(f"{session.task_id}/{session.trial}")  # seeded: reproducible
        if rng.random() < 0.3:
            return corral.Final(rng.choice([41, 42, 156, 999, 12]))  # a guess
        return corral.Action("calculate", {"expression": session.inputs["question"]})


tasks = {
    task_id: corral.BenchmarkTaskMetadata(
        agent_id="quiz", environment_id="calculator", model="toy", inputs={"question": question}
    )
    for task_id, (question, _) in QUESTIONS.items()
}
# A dependency: trial r of double-it runs after trial r of add, with its output.
tasks["double-it"] = corral.BenchmarkTaskMetadata(
    agent_id="quiz", environment_id="calculator", model="toy", dependencies=("add",)
)

benchmark = corral.Benchmark(
    tasks=tasks,
    agents={"quiz": QuizAgent()},
    environments={"calculator": Calculator()},
    run_defaults={"trials_per_task": 4, "k_values": (1, 2, 4), "max_parallel": 4},
)
