"""The demo's simulated models: how fast, how careful, how expensive, how much they read."""

from __future__ import annotations

import random
from dataclasses import dataclass

import anyio


@dataclass(frozen=True, slots=True)
class Pace:
    """Scales every simulated latency; 0 runs the demo as fast as Corral can go."""

    scale: float = 1.0

    async def wait(self, seconds: float, rng: random.Random) -> None:
        # The jitter is drawn even at scale 0 so that a fast run makes the same
        # random choices, and so the same results, as a slow one.
        await anyio.sleep(self.seconds(seconds, rng))

    def seconds(self, seconds: float, rng: random.Random) -> float:
        jitter = rng.uniform(0.6, 1.4)
        return seconds * jitter * self.scale


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
    #: The share of requests its content filter refuses (HTTP 400).
    refusals: float


MODELS: dict[str, SimulatedModel] = {
    m.name: m
    for m in (
        SimulatedModel("sim-large", 0.93, 0.085, input_price=3.0, output_price=15.0, refusals=0.0),
        SimulatedModel(
            "sim-small", 0.78, 0.045, input_price=0.25, output_price=1.25, refusals=0.012
        ),
    )
}


def careful(skill: float, previous_failed: bool) -> float:
    """A model told that its previous trial of the task failed is more careful."""
    return skill + (1.0 - skill) / 2 if previous_failed else skill
