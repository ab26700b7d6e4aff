"""Simulated models: how fast, how careful and how expensive each one is."""

from __future__ import annotations

import random
from dataclasses import dataclass

import anyio

from .._types import Evaluation
from ..runtime import AgentSession


@dataclass(frozen=True, slots=True)
class Pace:
    """Scales every simulated latency; 0 runs the demo as fast as Corral can go."""

    scale: float = 1.0

    async def wait(self, seconds: float, rng: random.Random) -> None:
        # The jitter is drawn even at scale 0 so that a fast run makes the same
        # random choices, and so the same results, as a slow one.
        jitter = rng.uniform(0.6, 1.4)
        await anyio.sleep(seconds * jitter * self.scale)


@dataclass(frozen=True, slots=True)
class SimulatedModel:
    name: str
    #: The chance that one step (a guess, reading a result) is done right.
    skill: float
    #: Mean seconds of one model call.
    latency: float
    #: Dollars per million input and output tokens.
    input_price: float
    output_price: float


MODELS: dict[str, SimulatedModel] = {
    m.name: m
    for m in (
        SimulatedModel("sim-large", skill=0.93, latency=0.085, input_price=3.0, output_price=15.0),
        SimulatedModel("sim-small", skill=0.78, latency=0.045, input_price=0.25, output_price=1.25),
    )
}


def decision_rng(session: AgentSession, purpose: str = "act") -> random.Random:
    """Randomness seeded by (task, trial, turn): a resumed or retried trial decides alike."""
    return random.Random(f"{session.task_id}/{session.trial}/{session.iteration}/{purpose}")


async def think(session: AgentSession, rng: random.Random, pace: Pace) -> float:
    """One simulated model call: wait its latency, record its tokens, return its skill.

    A model whose previous trial of this task failed is told so and becomes
    more careful (a reflective trial).
    """
    model = MODELS[session.model or "sim-small"]
    prompt = 420 + 95 * len(session.steps)
    completion = rng.randint(18, 90)
    session.record_usage(
        input_tokens=prompt,
        output_tokens=completion,
        cost=(prompt * model.input_price + completion * model.output_price) / 1e6,
    )
    await pace.wait(model.latency, rng)
    return careful(model.skill, session.previous_evaluation)


def careful(skill: float, previous: Evaluation | None) -> float:
    if previous is not None and not previous.passed:
        return skill + (1.0 - skill) / 2
    return skill
