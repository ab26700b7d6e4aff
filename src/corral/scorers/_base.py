"""What every scorer shares: a name, the trial's output as text, its targets, and
the `Evaluation` a verdict becomes (or an abstention)."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from .._chat import ChatModel, ChatResponse, call_latency, endpoint_of
from .._errors import ConfigError
from .._ids import check_id
from .._scoring_spend import spend
from .._types import NO_USAGE, Evaluation, TrialRecord, Usage
from ..history import DEFAULT_RECORD_CHARS, ModelCallPayload, model_call


class Scorer:
    """A scorer: ``await scorer(trial)`` is the trial's `Evaluation`, with its score
    under ``scores[scorer.name]`` too. Usable as an environment's ``evaluate``
    (``evaluate = corral.scorers.exact()`` in its class, or assigned to an instance),
    or with others in `combine`.
    """

    name: str

    def __init__(self, name: str) -> None:
        check_id("scorer name", name)
        self.name = name

    async def __call__(self, trial: TrialRecord) -> Evaluation:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<corral.scorers {type(self).__name__} {self.name!r}>"

    async def ask(
        self, client: ChatModel, messages: Sequence[Mapping[str, Any]], **options: Any
    ) -> tuple[ChatResponse, ModelCallPayload]:
        """``client.complete(messages, **options)``, and the call's record for the
        evaluation's ``model_calls`` (its messages whole, each string capped as a
        trial's calls are): the trial's transcript shows it as a scorer call."""
        start = anyio.current_time()
        response = await client.complete(messages, **options)
        latency = call_latency(response, anyio.current_time() - start)
        usage = response.usage
        spend(usage)  # paid for even if the evaluation raises before it returns
        record = model_call(
            0,
            messages,
            limit=DEFAULT_RECORD_CHARS,
            model=options.get("model") or getattr(client, "model", None),
            endpoint=endpoint_of(client),
            text=response.content,
            reasoning=response.reasoning,
            tool_calls=response.tool_calls,
            finish_reason=response.finish_reason,
            usage=(
                usage.input_tokens,
                usage.output_tokens,
                usage.cost,
                response.cache_read_tokens,
                response.cache_write_tokens,
            ),
            latency=latency,
            thinking=response.thinking,
            text_parts=response.text_parts,
            blocks=response.blocks,
        )
        return response, record

    def verdict(
        self,
        score: float,
        passed: bool,
        details: Mapping[str, Any] | None = None,
        usage: Usage = NO_USAGE,
    ) -> Evaluation:
        """The evaluation of a score: ``scores`` names it."""
        return Evaluation(float(score), passed, details or {}, {self.name: float(score)}, usage)

    def abstain(self, reason: str, usage: Usage = NO_USAGE, **details: Any) -> Evaluation:
        """No verdict (the grader gave no grade, say): not passed, score 0, and no named
        score, so a mean over ``scores[name]`` leaves this trial out."""
        return Evaluation(0.0, False, {"abstained": reason, **details}, {}, usage)


def as_text(value: Any) -> str:
    """A trial's output (or a target) as the text scorers compare: a string as it is,
    None as "", anything else as JSON (numbers as written: ``8``, ``2.5``)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def targets_of(trial: TrialRecord, scorer: str) -> list[Any]:
    """The trial's acceptable answers: its target, or each of a list of them."""
    target = trial.target
    if target is None:
        raise ConfigError(
            f"task {trial.task or trial.task_id!r} has no target: scorer {scorer!r} compares "
            "the output with one (BenchmarkTaskMetadata(..., target=...), or 'target' on "
            "its task line)"
        )
    if isinstance(target, list | tuple):
        if not target:
            raise ConfigError(f"task {trial.task or trial.task_id!r} has an empty list of targets")
        return list(target)
    return [target]


def plain_targets(trial: TrialRecord, scorer: str) -> list[Any]:
    """`targets_of`, each a text or a number: a scorer that reads a target's words or
    its number takes no object or list for one (a dataset row's ``answers`` object, say,
    whose JSON text it would read)."""
    targets = targets_of(trial, scorer)
    for target in targets:
        if not isinstance(target, str | int | float):
            raise ConfigError(
                f"task {trial.task or trial.task_id!r} target {target!r} is not a text or "
                f"a number, as scorer {scorer!r} compares: give the answer itself as the "
                "target (a list of them for several), e.g. with a dataset's target= function"
            )
    return targets


_SPACES = re.compile(r"\s+")
#: The full-width forms of ASCII (U+FF01-U+FF5E, as CJK input types ``１２３``, ``Ａ``)
#: and the ideographic space, as the characters they are wide forms of.
_FULL_WIDTH = {0xFF01 + n: 0x21 + n for n in range(0x5E)} | {0x3000: 0x20}


def folded(text: str) -> str:
    """``text`` with one spelling of each character: composed (NFC: ``e`` and a combining
    accent are ``é``) and full-width forms as ASCII. Other compatibility forms stay
    themselves (``10²`` is not ``102``)."""
    return unicodedata.normalize("NFC", text).translate(_FULL_WIDTH)


def normalized(text: str, *, ignore_case: bool) -> str:
    """``text`` `folded`, without surrounding or repeated whitespace (and lower-cased if
    asked)."""
    text = _SPACES.sub(" ", folded(text)).strip()
    return text.casefold() if ignore_case else text
