"""Number search: find a hidden number with a `guess` tool that says higher or lower."""

from __future__ import annotations

import json
import random
from typing import Any

from .._tools import Tool
from .._types import Action, Evaluation, ToolEffect, TrialRecord
from ..runtime import AgentSession
from ..testing import ChatReply
from ._chat import Chat
from ._models import Pace

TOOL_LATENCY = 0.02
GRADE_LATENCY = 0.06

GUESS = Tool(
    "guess",
    "Guess the hidden number: answers 'higher', 'lower' or 'correct'.",
    {
        "type": "object",
        "properties": {"number": {"type": "integer", "minimum": 1}},
        "required": ["number"],
        "additionalProperties": False,
    },
)


def secret_of(task_id: str, high: int) -> int:
    """The hidden number of a task: fixed per task, so its trials are comparable."""
    return random.Random(f"secret/{task_id}").randint(1, high)


class SearchEnvironment:
    """The number is in 1..high; ``guess(number)`` answers higher, lower or correct.

    The state records every guess; the secret never enters it, so an agent
    cannot read it back.
    """

    name = "search"
    tools = (GUESS,)

    def __init__(self, pace: Pace) -> None:
        self.pace = pace

    async def setup(self, session: AgentSession) -> Any:
        return {"high": int(session.inputs["high"]), "guesses": []}

    async def execute(self, action: Action, session: AgentSession) -> ToolEffect:
        await self.pace.wait(TOOL_LATENCY, random.Random(session.step_key))
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
        if not isinstance(answer, int) or isinstance(answer, bool):
            return Evaluation(0.0, False, {"secret": secret, "answer": answer})
        return Evaluation(
            score=round(1.0 - abs(answer - secret) / high, 3),
            passed=answer == secret,
            details={"secret": secret, "answer": answer, "guesses": len(trial.state["guesses"])},
        )


def bisect(chat: Chat, skill: float) -> ChatReply:
    """The scripted model's turn: bisect the range, as a sometimes sloppy model would.

    It rereads the conversation every turn, misreads an answer now and then,
    sometimes guesses at random or repeats itself, and now and then answers
    before it has checked.
    """
    rng = chat.rng("act")
    low, high = 1, int(chat.inputs["high"])
    steps = [
        (args["number"], observation)
        for turn in chat.turns
        for (name, args), observation in zip(turn.calls, turn.observations, strict=True)
        if name == "guess" and args and observation in ("higher", "lower", "correct")
    ]
    for i, (number, answer) in enumerate(steps):
        if answer == "correct":
            return ChatReply.text(json.dumps(number))
        if chat.reading(i) > skill + (1.0 - skill) * 0.6:
            answer = "lower" if answer == "higher" else "higher"  # misread
        if answer == "higher":
            low = max(low, number + 1)
        else:
            high = min(high, number - 1)
    if low >= high:
        # One candidate left, or notes that contradict each other: answer now.
        return ChatReply.text(json.dumps(low))
    middle = (low + high) // 2
    roll = rng.random()
    if roll < (1.0 - skill) * 0.2:
        return ChatReply.text(f"It must be {middle}.")  # overconfident: answers unchecked
    if roll < (1.0 - skill) * 0.6 and steps:
        return ChatReply.tools(("guess", {"number": steps[-1][0]}))  # forgot: a wasted turn
    guess = middle if rng.random() < skill else rng.randint(low, high)
    return ChatReply.tools(("guess", {"number": guess}))
