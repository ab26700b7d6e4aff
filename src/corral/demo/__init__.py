"""The built-in demo: a small agent benchmark with no network and no keys.

Two models work two environments through `corral.agents.ToolAgent`: a number
search (sequential tool calls, sloppy guesses, reflective retries after a
failed trial) and a calculator service (parallel tool calls, flaky calls that
are retried, a grader with an answer key), plus a ``bid-plan -> bid-build ->
bid-verify`` chain whose children read their parent's output. The models are
a scripted server on 127.0.0.1 (`demo_server`, OpenAI-compatible or Anthropic's
Messages API), or any real endpoint of either. Every choice is seeded per (task,
trial, turn), so results are deterministic (the Messages API sends no seed: there,
the trials of a task answer alike); ``latency`` scales the simulated waits (0 for
tests).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .._benchmark import Benchmark
from .._errors import ConfigError, CorralError
from ..runtime import RetryPolicy
from ._calculator import CalculatorEnvironment
from ._models import MODELS, Pace
from ._preflight import PROBE_TIMEOUT, check_endpoint, probe_endpoint
from ._script import DemoModel, parse_answer
from ._search import SearchEnvironment
from ._tasks import demo_tasks

__all__ = [
    "PROBE_TIMEOUT",
    "SYSTEM_PROMPT",
    "PROVIDERS",
    "DemoModel",
    "build_demo",
    "check_endpoint",
    "demo_retry_policy",
    "demo_server",
    "probe_endpoint",
]

SYSTEM_PROMPT = (
    "You solve tasks with the tools you are given. Call tools as needed (several at "
    "once when they do not depend on each other). When you are done, reply with only "
    "the final answer as JSON, in the shape the task asks for, and no tool call."
)


#: The APIs the demo speaks: `corral.models.OpenAICompatible`'s and `corral.models.Anthropic`'s.
PROVIDERS = ("openai", "anthropic")


@contextmanager
def demo_server(latency: float = 1.0, provider: str = "openai") -> Iterator[str]:
    """Serve the demo's scripted models on 127.0.0.1 with ``provider``'s API; yields
    the base URL."""
    from ..testing import FakeAnthropicServer, FakeChatServer, chat_request

    script = DemoModel(latency)
    if provider == "anthropic":
        with FakeAnthropicServer(lambda body: script(chat_request(body))) as server:
            yield server.url
    else:
        with FakeChatServer(script) as server:
            yield server.url


def build_demo(
    base_url: str | None,
    latency: float = 1.0,
    models: Sequence[str] = tuple(MODELS),
    api_key: str | None = None,
    provider: str = "openai",
) -> Benchmark:
    """The demo benchmark on the models at ``base_url`` (None: the provider's own),
    with its run settings (4 trials, k = 1, 2, 4, limits). One agent per model
    (each with its prices), on ``provider``'s client. ``api_key=None`` reads the
    provider's variable (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``); ``""`` sends
    no key."""
    if provider not in PROVIDERS:
        raise ConfigError(f"unknown provider {provider!r}; expected one of {PROVIDERS}")
    try:
        from ..agents import ToolAgent
        from ..models import Anthropic, OpenAICompatible
    except ImportError as exc:
        raise CorralError(
            "the demo needs httpx: pip install 'corral[models]' (or -e '.[models]')"
        ) from exc
    pace = Pace(latency)
    tasks, answers = demo_tasks(tuple(models))
    agents = {}
    for name in models:
        simulated = MODELS.get(name)
        prices = None
        if simulated is not None:
            prices = {"input": simulated.input_price, "output": simulated.output_price}
        client: Any = (OpenAICompatible if provider == "openai" else Anthropic)(
            name, base_url=base_url, api_key=api_key, prices=prices
        )
        agents[name] = ToolAgent(
            client, SYSTEM_PROMPT, parse_final=parse_answer, seed=2026, reflect=True
        )
    limits = {"sim-large": 4, "sim-small": 5}
    return Benchmark(
        tasks=tasks,
        agents=agents,
        environments={
            "search": SearchEnvironment(pace),
            "calculator": CalculatorEnvironment(pace, answers),
        },
        run_defaults={
            "trials_per_task": 4,
            "k_values": (1, 2, 4),
            "max_parallel": 8,
            "max_parallel_per_task": 1,
            "max_parallel_evaluations": 3,
            "max_parallel_by_model": {m: limits.get(m, 4) for m in models},
            "max_parallel_by_environment": {"calculator": 4},
            "max_parallel_evaluations_by_environment": {"search": 1},
        },
    )


def demo_retry_policy(latency: float = 1.0) -> RetryPolicy:
    """Two retries with short, seeded backoff (the calculator service is flaky)."""
    return RetryPolicy(max_retries=2, backoff_base=0.05 * latency, rng=random.Random(0))
