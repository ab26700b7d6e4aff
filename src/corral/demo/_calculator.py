"""Arithmetic with a calculator service: parallel tool calls, flaky calls, a grader.

The scripted model works a job in a few phases over a list of numbers: multiply pairs (one turn of
parallel ``mul`` calls), add them up pairwise (parallel ``add`` calls, turn
after turn, until one number is left), optionally subtract. The three bid
tasks chain through dependencies: plan -> build -> verify.
"""

from __future__ import annotations

import json
import operator
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._tools import Tool
from .._types import Action, Evaluation, ToolEffect, TrialRecord
from ..runtime import AgentSession
from ..testing import ChatReply
from ._chat import Chat
from ._models import Pace

TOOL_LATENCY = 0.035
GRADE_LATENCY = 0.07
#: The chance that one call to the calculator service fails transiently.
FLAKINESS = 0.03

OPERATIONS: dict[str, Callable[[int, int], int]] = {
    "add": operator.add,
    "sub": operator.sub,
    "mul": operator.mul,
}

Call = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class Job:
    """What a calculator task asks: multiply ``pairs`` (or take ``values``), add
    everything up unless ``add_up`` is false, then subtract ``minus`` if given."""

    pairs: tuple[tuple[int, int], ...] = ()
    values: tuple[int, ...] = ()
    add_up: bool = True
    minus: int | None = None

    def turn(self, phase: int, values: list[int]) -> tuple[list[Call], list[int], int]:
        """(calls, numbers carried past them, phase after them); no calls: done.

        Phases: 0 multiply, 1 add pairwise, 2 subtracted.
        """
        if phase == 0 and self.pairs:
            return [("mul", a, b) for a, b in self.pairs], [], 1
        if phase <= 1 and self.add_up and len(values) > 1:
            calls = [("add", values[i], values[i + 1]) for i in range(0, len(values) - 1, 2)]
            return calls, values[len(calls) * 2 :], 1
        if phase <= 1 and self.minus is not None:
            return [("sub", values[0], self.minus)], [], 2
        return [], values, phase


def job_of(inputs: Mapping[str, Any]) -> tuple[Job, str]:
    """The job and the kind of answer a task wants, from its inputs and its parent's."""
    kind = str(inputs.get("kind", "arithmetic"))
    if kind == "build":
        return Job(values=tuple(parent_output(inputs)["lines"])), kind
    pairs = tuple((int(a), int(b)) for a, b in inputs["pairs"])
    return Job(pairs=pairs, add_up=kind != "plan", minus=inputs.get("minus")), kind


def parent_output(inputs: Mapping[str, Any]) -> Any:
    """The output of the task's (one) parent, which Corral put in its inputs."""
    return next(value for value in inputs.values() if isinstance(value, Mapping))


def answer(kind: str, values: list[int], inputs: Mapping[str, Any]) -> Any:
    if kind == "plan":
        return {"lines": values}
    if kind == "build":
        return {"subtotal": values[0]}
    if kind == "verify":
        reported = parent_output(inputs)["subtotal"]
        return {"subtotal": values[0], "reported": reported, "approved": values[0] == reported}
    return values[0]


def work_out(chat: Chat, skill: float) -> ChatReply:
    """The scripted model's turn: work the job out with the calculator, many calls per
    turn, replaying its progress from the conversation.

    A sloppy model sometimes copies a result down wrong, now and then calls a
    tool the calculator lacks or writes broken JSON (both come back as errors,
    and it tries again, a turn lost).
    """
    rng = chat.rng("act")
    job, kind = job_of(chat.inputs)
    observations = [o for turn in chat.turns if turn.ok for o in turn.observations]
    phase, values = 0, list(job.values)
    done = 0  # results replayed so far
    while True:
        calls, carried, after = job.turn(phase, values)
        if not calls:
            return ChatReply.text(json.dumps(answer(kind, values, chat.inputs)))
        if done + len(calls) > len(observations):
            break  # this turn has not been made yet: make it now
        values = [
            _read(chat, done + i, observations[done + i], skill) for i in range(len(calls))
        ] + carried
        done += len(calls)
        phase = after
    roll = rng.random()
    if roll < (1.0 - skill) * 0.2:
        return ChatReply.tools(("pow", {"a": calls[0][1], "b": 2}))  # a tool it lacks
    if roll < (1.0 - skill) * 0.3:
        tool, a, _ = calls[0]
        return ChatReply.tools((tool, f'{{"a": {a}, "b": '))  # cut-off JSON
    return ChatReply.tools(*((tool, {"a": a, "b": b}) for tool, a, b in calls))


def _read(chat: Chat, index: int, observation: Any, skill: float) -> int:
    value = int(observation)
    if chat.reading(index) > skill + (1.0 - skill) * 0.5:
        rng = random.Random(f"{chat.seed}/typo/{index}")
        return value + rng.choice((-10, -1, 1, 10))  # copied down wrong
    return value


class CalculatorEnvironment:
    """A calculator service with ``add``, ``sub`` and ``mul``, and a grader that
    holds the answer key (so no agent can read the answers from its state)."""

    name = "calculator"
    tools = tuple(
        Tool(
            name,
            f"{verb} two integers.",
            {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
                "additionalProperties": False,
            },
        )
        for name, verb in (("add", "Add"), ("sub", "Subtract b from a:"), ("mul", "Multiply"))
    )

    def __init__(self, pace: Pace, answers: Mapping[str, Any]) -> None:
        self.pace = pace
        self.answers = answers

    async def setup(self, session: AgentSession) -> Any:
        return {"service": "calculator", "tools": sorted(OPERATIONS)}

    async def execute(self, action: Action, session: AgentSession) -> ToolEffect:
        # Seeded by the call and the attempt, so a retry usually gets through, and
        # not by the step key, which differs between benchmark ids: every run of
        # the demo sees the same failures.
        call = f"{action.tool}/{sorted(action.arguments.items())}"
        rng = random.Random(
            f"{session.task_id}/{session.trial}/{session.iteration}/{call}/{session.attempt}"
        )
        await self.pace.wait(TOOL_LATENCY, rng)
        if rng.random() < FLAKINESS:
            raise ConnectionError("calculator service timed out (simulated)")
        operation = OPERATIONS[action.tool]  # its declared tools: Corral refuses any other
        return ToolEffect(operation(int(action.arguments["a"]), int(action.arguments["b"])))

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        await self.pace.wait(GRADE_LATENCY, random.Random(f"{trial.task_id}/{trial.trial}/grade"))
        expected = self.answers[trial.task_id]
        output = trial.output
        if isinstance(expected, Mapping) and "approved_if_reported" in expected:
            # verify: right when its own subtotal is right and it judged the build correctly.
            truth = expected["approved_if_reported"]
            passed = (
                isinstance(output, Mapping)
                and output.get("subtotal") == truth
                and output.get("approved") == (output.get("reported") == truth)
            )
            return Evaluation(float(passed), passed, {"expected_subtotal": truth})
        passed = output == expected
        return Evaluation(float(passed), passed, {"expected": expected})


def expected_answer(inputs: Mapping[str, Any]) -> Any:
    """The answer key of a calculator task, from its static inputs."""
    kind = inputs.get("kind", "arithmetic")
    lines = [int(a) * int(b) for a, b in inputs["pairs"]]
    if kind == "plan":
        return {"lines": lines}
    if kind == "build":
        return {"subtotal": sum(lines)}
    if kind == "verify":
        return {"approved_if_reported": sum(lines)}
    return sum(lines) - int(inputs.get("minus") or 0)


def line_pairs(items: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    return [[int(item["qty"]), int(item["price"])] for item in items]
