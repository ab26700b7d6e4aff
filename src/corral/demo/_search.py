"""Number search: find a hidden number with a `guess` tool that says higher or lower."""

from __future__ import annotations

import random
from typing import Any

from .._types import Action, Evaluation, Final, ToolEffect, TrialRecord
from ..runtime import AgentSession
from ._models import Pace, decision_rng, think

TOOL_LATENCY = 0.02
GRADE_LATENCY = 0.06


def secret_of(task_id: str, high: int) -> int:
    """The hidden number of a task: fixed per task, so its trials are comparable."""
    return random.Random(f"secret/{task_id}").randint(1, high)


class SearchEnvironment:
    """The number is in 1..high; ``guess(number)`` answers higher, lower or correct.

    The state records every guess; the secret never enters it, so an agent
    cannot read it back.
    """

    name = "search"

    def __init__(self, pace: Pace) -> None:
        self.pace = pace

    async def setup(self, session: AgentSession) -> Any:
        return {"high": int(session.inputs["high"]), "guesses": []}

    async def execute(self, action: Action, session: AgentSession) -> ToolEffect:
        await self.pace.wait(TOOL_LATENCY, random.Random(session.step_key))
        if action.tool != "guess":
            raise ValueError(f"unknown tool {action.tool!r}: the search environment has 'guess'")
        number = action.arguments["number"]
        secret = secret_of(session.task_id, session.state["high"])
        observation = "correct" if number == secret else "higher" if secret > number else "lower"
        state = {**session.state, "guesses": [*session.state["guesses"], number]}
        return ToolEffect(observation, state)

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        await self.pace.wait(GRADE_LATENCY, random.Random(f"{trial.task_id}/{trial.trial}/grade"))
        high = trial.state["high"]
        secret = secret_of(trial.task_id, high)
        answer = trial.output
        if not isinstance(answer, int):
            return Evaluation(0.0, False, {"secret": secret, "answer": answer})
        return Evaluation(
            score=round(1.0 - abs(answer - secret) / high, 3),
            passed=answer == secret,
            details={"secret": secret, "answer": answer, "guesses": len(trial.state["guesses"])},
        )


class BisectAgent:
    """Bisects the range, as a model that is sometimes sloppy would.

    It rebuilds its bounds from ``session.steps`` on every turn (nothing is
    kept on ``self``), misreads an answer now and then, sometimes guesses at
    random or repeats itself, and now and then answers before it has checked.
    """

    def __init__(self, pace: Pace) -> None:
        self.pace = pace

    async def act(self, session: AgentSession) -> Action | Final:
        rng = decision_rng(session)
        skill = await think(session, rng, self.pace)
        low, high = 1, int(session.inputs["high"])
        for i, step in enumerate(session.steps):
            number = step.action.arguments["number"]
            answer = step.effect.observation
            if answer == "correct":
                return Final(number)
            # Each reading has its own seed, so replaying the steps reads them alike.
            misread = random.Random(f"{session.task_id}/{session.trial}/read/{i}").random()
            if misread > skill + (1.0 - skill) * 0.6:
                answer = "lower" if answer == "higher" else "higher"
            if answer == "higher":
                low = max(low, number + 1)
            else:
                high = min(high, number - 1)
        if low >= high:
            # One candidate left, or notes that contradict each other: answer now.
            return Final(low)
        middle = (low + high) // 2
        roll = rng.random()
        if roll < (1.0 - skill) * 0.2:
            return Final(middle)  # overconfident: answers without checking
        if roll < (1.0 - skill) * 0.6 and session.steps:
            return Action("guess", session.steps[-1].action.arguments)  # forgot: a wasted turn
        guess = middle if rng.random() < skill else rng.randint(low, high)
        return Action("guess", {"number": guess})
