"""`model_graded`: a chat model grades the output against the target."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import string
from collections.abc import Mapping

from .._chat import ChatModel, ChatResponse
from .._checks import is_number, positive_int
from .._errors import ConfigError
from .._ids import check_id
from .._types import Evaluation, TrialRecord
from ._base import Scorer, as_text

DEFAULT_TEMPLATE = """You are grading an answer to a task.

[Task]
{input}

[Answer to grade]
{output}

[Correct answer]
{target}

Is the answer to grade correct? Compare it with the correct answer; ignore style and
wording. Reply with your reasoning, then a last line that is exactly GRADE: C if it is
correct, GRADE: P if it is partly correct, or GRADE: I if it is incorrect."""

#: ``GRADE: C`` in any case, in markdown (``**GRADE:** C``, ``GRADE: **C**``,
#: ``GRADE: `C```) or marked off (``GRADE: (C)``, ``"C"``, ``[C]``), as judges write
#: it; the letter alone or beginning its word (``GRADE: Correct``, ``Incorrect``,
#: ``Partly``). Not a word ending in grade (``upgrade: ...``) nor one
#: the letter begins (``grade: it depends``, ``grade: I'd``, with a curly apostrophe
#: too): the reasoning's words are no grade. A quote closing the grade is no
#: apostrophe (``'GRADE: C'``): only one a letter follows begins a word. A grade marked
#: off is closed, no word after it on its line: ``grade: (i) first ...`` is a list.
DEFAULT_GRADE_PATTERN = (
    r"(?i)(?<![a-z])GRADE[\s*_]*:[\s*_]*"
    r"(?:[`\"'(\[\u2018\u201c][ \t*_]*"
    r"(?=[a-z]+(?:[ \t-][a-z]+)*[ \t*_]*[`\"')\]\u2019\u201d](?![ \t]*\w)))?"
    r"(C(?=orrect)|I(?=ncorrect)|P(?=art)|[CPI](?![a-z]|['\u2019][a-z]))"
)
DEFAULT_GRADES: Mapping[str, float] = {"C": 1.0, "P": 0.5, "I": 0.0}
#: What may come before a grade that begins its line: up to three spaces, then
#: markdown's heading, list and emphasis marks. Not a quote's ``>`` (a rubric the judge
#: quotes) nor a code block's indent (an example): those lines are no grade of its own.
_LINE_START = re.compile(r" {0,3}(?:[*_#-][ \t*_#-]*)?")
#: The fields a template may use.
FIELDS = ("input", "output", "target", "metadata", "task", "model")


class _ModelGraded(Scorer):
    def __init__(
        self,
        name: str,
        model: ChatModel,
        template: str,
        grade: re.Pattern[str],
        grades: Mapping[str, float] | None,
        threshold: float,
        max_tokens: int | None,
        grader_model: str | None,
    ) -> None:
        super().__init__(name)
        self.model = model
        self.template = template
        self.grade = grade
        self.grades = grades
        self.threshold = threshold
        self.max_tokens = max_tokens
        self.grader_model = grader_model

    def prompt(self, trial: TrialRecord) -> str:
        inputs = dict(trial.inputs)
        # The prompt alone when it is all there is; else every input, as JSON.
        asked = as_text(inputs["prompt"] if set(inputs) == {"prompt"} else inputs)
        values = {
            "input": asked,
            "output": as_text(trial.output),
            "target": as_text(trial.target),
            "metadata": json.dumps(dict(trial.metadata), ensure_ascii=False, sort_keys=True),
            "task": trial.task or trial.task_id,
            "model": trial.model or "",
        }
        return self.template.format_map(values)

    async def __call__(self, trial: TrialRecord) -> Evaluation:
        reply, call = await self.ask(
            self.model,
            [{"role": "user", "content": self.prompt(trial)}],
            model=self.grader_model,
            max_tokens=self.max_tokens,
            temperature=0.0,
        )
        return dataclasses.replace(self._graded(reply), model_calls=(call,))

    def _graded(self, reply: ChatResponse) -> Evaluation:
        text = reply.content or ""
        found = list(self.grade.finditer(text))
        if not found:  # no grade given: no verdict rather than a made-up one
            return self.abstain("the grader gave no grade", reply.usage, grader=text[-2000:])
        # The grade line the template asks for, not a grade its explanation mentions
        # after it ("... it would need GRADE: C"): the last grade that begins its line.
        lines = [
            m
            for m in found
            if _LINE_START.fullmatch(text, text.rfind("\n", 0, m.start()) + 1, m.start())
        ]
        last = (lines or found)[-1].group(1) or ""
        score = self._score(last.strip())
        if score is None:
            return self.abstain(
                f"the grader's grade {last!r} is not one of the grades",
                reply.usage,
                grader=text[-2000:],
            )
        details = {"grade": last, "grader": text[-2000:]}
        return self.verdict(score, score >= self.threshold, details, reply.usage)

    def _score(self, grade: str) -> float | None:
        if self.grades is not None:
            return self.grades.get(grade, self.grades.get(grade.upper()))
        try:
            value = float(grade)
        except ValueError:
            return None
        return value if math.isfinite(value) else None


def model_graded(
    model: ChatModel,
    *,
    template: str = DEFAULT_TEMPLATE,
    grade_pattern: str = DEFAULT_GRADE_PATTERN,
    grades: Mapping[str, float] | None = DEFAULT_GRADES,
    threshold: float = 1.0,
    max_tokens: int | None = None,
    grader_model: str | None = None,
    name: str = "model_graded",
) -> Scorer:
    """A chat model (any `corral.models.ChatModel`: ``OpenAICompatible``, ...) grades
    the output. ``template`` is formatted with ``{input}`` (the task's inputs: its
    ``prompt`` alone if that is all), ``{output}``, ``{target}``, ``{metadata}``,
    ``{task}`` and ``{model}``, and sent as one user message at temperature 0. The
    last match of ``grade_pattern`` that begins its line in the reply (its first
    group; the last match anywhere if none begins a line) is the grade:
    mapped through ``grades`` (C/P/I to 1/0.5/0 by default), or read as a number
    when ``grades`` is None. The trial passes when the score is at least
    ``threshold``. A reply without a grade abstains (no named score).

    The grader's calls run inside ``evaluate``: under the run's evaluation limits
    (``max_parallel_evaluations``, ``evaluation_timeout``), retried like any
    evaluation (a 429 waits). Their tokens and cost are recorded on the evaluation:
    in the report's usage, and counted against ``run_cost_limit``. Each call is
    recorded with the evaluation (`Evaluation.model_calls`): the trial's transcript
    shows it as a scorer call.
    """
    if not callable(getattr(model, "complete", None)):
        raise ConfigError(f"model must be a chat model with a complete() method, not {model!r}")
    if not isinstance(template, str):
        raise ConfigError(f"template must be a string, not {template!r}")
    used = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    unknown = sorted(used - set(FIELDS))
    if unknown:
        raise ConfigError(
            f"template field {{{unknown[0]}}} is not one of {', '.join(FIELDS)} "
            "(write {{ and }} for literal braces)"
        )
    try:
        grade = re.compile(grade_pattern)
    except (re.error, TypeError) as exc:
        raise ConfigError(
            f"grade_pattern {grade_pattern!r} is not a regular expression: {exc}"
        ) from None
    if grade.groups < 1:
        raise ConfigError(f"grade_pattern {grade_pattern!r} needs a group around the grade")
    if grades is not None:
        if not isinstance(grades, Mapping) or not grades:
            raise ConfigError(f"grades must map grades to scores, not {grades!r}")
        for key, value in grades.items():
            if not isinstance(key, str) or not is_number(value):
                raise ConfigError(f"grades must map text to numbers, not {key!r}: {value!r}")
        grades = {k: float(v) for k, v in grades.items()}
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ConfigError(f"threshold must be a number, not {threshold!r}")
    positive_int("max_tokens", max_tokens, or_none=True)
    if grader_model is not None:
        check_id("grader_model", grader_model)  # a model's name, as a task's model is
    return _ModelGraded(
        name, model, template, grade, grades, float(threshold), max_tokens, grader_model
    )
