"""What the demo's scripted model reads from a chat request: the task, its turns."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from ..agents._conversation import REFLECTION


@dataclass(slots=True)
class Turn:
    """One assistant message: its calls (name, arguments or None if not JSON) and the
    observations that answered them."""

    calls: list[tuple[str, dict[str, Any] | None]] = field(default_factory=list)
    observations: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(isinstance(o, str) and o.startswith("error:") for o in self.observations)


@dataclass(slots=True)
class Chat:
    model: str
    seed: int
    inputs: dict[str, Any]
    previous_failed: bool
    turns: list[Turn]

    def rng(self, purpose: str) -> random.Random:
        """Randomness seeded by the trial and the turn: a retried request decides alike."""
        return random.Random(f"{self.seed}/{len(self.turns)}/{purpose}")

    def reading(self, index: int) -> float:
        """A draw of its own for reading step ``index`` (a replay reads it alike)."""
        return random.Random(f"{self.seed}/read/{index}").random()


def read_chat(body: dict[str, Any]) -> Chat:
    messages = body["messages"]
    user = next(m["content"] for m in messages if m["role"] == "user")
    inputs: dict[str, Any] = {}
    if "Inputs:\n" in user:
        inputs, _ = json.JSONDecoder().raw_decode(user.split("Inputs:\n", 1)[1])
    previous_failed = REFLECTION in user and "did not pass" in user
    observations = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    turns = []
    for message in messages:
        if message["role"] != "assistant":
            continue
        turn = Turn()
        for call in message.get("tool_calls") or ():
            try:
                arguments = json.loads(call["function"]["arguments"])
            except ValueError:
                arguments = None
            turn.calls.append((call["function"]["name"], arguments))
            turn.observations.append(_value(observations.get(call["id"])))
        turns.append(turn)
    seed = body.get("seed")
    return Chat(
        model=str(body.get("model")),
        seed=seed if isinstance(seed, int) else 0,
        inputs=inputs,
        previous_failed=previous_failed,
        turns=turns,
    )


def _value(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text
