"""Value types: task metadata, what agents and environments exchange, commits, records."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple
from typing import Final as _Final

from ._errors import ConfigError

_EMPTY: Mapping[str, Any] = MappingProxyType({})
#: The default of the mapping fields: the one shared empty mapping, from a C callable
#: (no Python call per record or action built).
_empty: Callable[[], Mapping[str, Any]] = itertools.repeat(_EMPTY).__next__


class _Unchanged:
    """The state of a `ToolEffect` that leaves the trial's state as it was."""

    _instance: _Unchanged | None = None

    def __new__(cls) -> _Unchanged:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<unchanged>"

    def __reduce__(self) -> str:
        return "UNCHANGED"


UNCHANGED: _Final = _Unchanged()


@dataclass(frozen=True, slots=True)
class BenchmarkTaskMetadata:
    """What a task is: who acts, where, on which model, and from which inputs."""

    agent_id: str
    environment_id: str
    model: str | None = None
    max_iterations: int = 10
    dependencies: tuple[str, ...] = ()
    inputs: Mapping[str, Any] = field(default_factory=_empty)
    #: This task's per-trial budgets (None: the run's, if any); see README "Budgets per trial".
    token_limit: int | None = None
    cost_limit: float | None = None
    working_time_limit: float | None = None
    #: What the scorer compares the output with (`TrialRecord.target`); never shown
    #: to the agent.
    target: Any = None
    #: Anything else the scorer may use (`TrialRecord.metadata`); never shown to the agent.
    metadata: Mapping[str, Any] = field(default_factory=_empty)

    def __post_init__(self) -> None:
        if isinstance(self.dependencies, str):
            # ("parent") is a string, not a tuple: splitting it into letters would
            # silently build a wrong graph.
            raise ConfigError(
                f"dependencies must be a tuple of task ids, not the string "
                f"{self.dependencies!r} (write ({self.dependencies!r},))"
            )
        # A list given for dependencies is kept as the tuple the type promises.
        if not isinstance(self.dependencies, tuple):
            object.__setattr__(self, "dependencies", tuple(self.dependencies))


@dataclass(frozen=True, slots=True)
class Action:
    """One tool call proposed by an agent."""

    tool: str
    arguments: Mapping[str, Any] = field(default_factory=_empty)


@dataclass(frozen=True, slots=True)
class Final:
    """The agent's answer: the trial ends ``completed`` with this output."""

    output: Any


@dataclass(frozen=True, slots=True)
class ToolEffect:
    """What executing an action did: an observation and, optionally, a new state."""

    observation: Any
    state: Any = UNCHANGED


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and cost, summed over steps and trials."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost + other.cost,
        )

    def __bool__(self) -> bool:
        return bool(self.input_tokens or self.output_tokens or self.cost)

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            # Infinite only in histories written before costs were bounded (see
            # `record_usage`): JSON has no Infinity, so the sum is unknown.
            "cost": self.cost if math.isfinite(self.cost) else None,
        }


NO_USAGE: _Final = Usage()


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The score of one finished trial.

    ``scores`` names several scores of one trial (``{"accuracy": 1.0, "f1": 0.6}``):
    each a finite number. ``usage`` is what scoring itself spent (a graded-by-model
    scorer's calls): it is recorded with the evaluation and counts against the run's
    budgets. A scorer that abstains from a named score leaves it out.
    ``model_calls`` are the calls scoring made (`corral.scorers.Scorer.ask`), each a
    `corral.history.ModelCallPayload`: recorded with the evaluation, shown in the
    trial's transcript as scorer calls.
    """

    score: float
    passed: bool
    details: Mapping[str, Any] = field(default_factory=_empty)
    scores: Mapping[str, float] = field(default_factory=_empty)
    usage: Usage = field(default=NO_USAGE, compare=False)
    model_calls: tuple[Any, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        # A scorer computing with numpy gives its scalars (``score > 0.5`` is a numpy
        # bool, a float32 no float): what they hold is recorded, not refused. One
        # evaluation is made a trial: the common case (plain values, no named scores)
        # costs two type tests.
        if type(self.score) in _PLAIN_SCORE and type(self.passed) is bool and not self.scores:
            return
        object.__setattr__(self, "score", _python_scalar(self.score))
        object.__setattr__(self, "passed", _python_scalar(self.passed))
        scores = self.scores
        if isinstance(scores, Mapping) and any(map(_is_numpy_scalar, scores.values())):
            plain = {name: _python_scalar(value) for name, value in scores.items()}
            object.__setattr__(self, "scores", plain)


#: The types of a score that need no conversion.
_PLAIN_SCORE = frozenset({float, int})


def _is_numpy_scalar(value: object) -> bool:
    """Whether ``value`` is one number or truth value of numpy's (a scalar or a 0-d
    array), told without importing numpy."""
    return type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0


def _python_scalar(value: Any) -> Any:
    """``value``, a numpy scalar as the Python bool, int or float it holds."""
    return value.item() if _is_numpy_scalar(value) else value


class TrialKey(NamedTuple):
    """One trial of one task of one benchmark: what a history is stored under."""

    benchmark_id: str
    task_id: str
    trial: int


@dataclass(frozen=True, slots=True)
class Commit:
    """One durable entry of a trial's append-only history."""

    seq: int
    kind: str
    payload: Any
    created_at: float
    usage: Usage = NO_USAGE


@dataclass(frozen=True, slots=True)
class Step:
    """An action the agent declared and the effect of executing it."""

    action: Action
    effect: ToolEffect


def slot_builder(cls: type[Any]) -> Callable[..., Any]:
    """A function of the fields of the frozen, slotted dataclass ``cls``, every one
    given in field order, that returns the object ``cls(...)`` returns, in a fraction
    of its cost.

    What the values built several times a trial are built with: a frozen dataclass's
    ``__init__`` sets each field through ``object.__setattr__``, and a call of a slot's
    own setter costs about as much (~650 instructions a field). The function sets each
    as a plain object's attribute (one bytecode), on an object of a class with the same
    slots, and then makes it a ``cls`` (``__class__`` assignment, which the same layout
    allows); it is written out as the dataclass writes its ``__init__``. A class with a
    ``__post_init__`` gets none (its constructor would skip it)."""
    assert not hasattr(cls, "__post_init__"), cls
    names = [f.name for f in fields(cls)]
    plain = type(f"_{cls.__name__}Slots", (), {"__slots__": cls.__slots__})
    body = "".join(f"    __o.{name} = {name}\n" for name in names)
    text = (
        f"def build({', '.join(names)}):\n    __o = __new(__plain)\n{body}"
        "    __o.__class__ = __cls\n    return __o\n"
    )
    scope: dict[str, Any] = {"__new": object.__new__, "__plain": plain, "__cls": cls}
    exec(text, scope)
    build: Callable[..., Any] = scope["build"]
    return build


#: ``Commit(seq, kind, payload, created_at, usage)``, the same object (`slot_builder`):
#: the runtime builds the five every trial writes here, each in a third of what
#: ``Commit``'s ``__init__`` costs.
new_commit: Callable[[int, str, Any, float, Usage], Commit] = slot_builder(Commit)


class TrialStatus(StrEnum):
    """How a trial ended."""

    COMPLETED = "completed"
    MAX_ITERATIONS = "max_iterations"
    TIMEOUT = "timeout"
    ERROR = "error"
    UNREACHABLE = "unreachable"
    #: A per-trial budget was exceeded (`TrialRecord.limit` names it); scored, never passed.
    LIMIT = "limit"


#: Statuses whose trials are scored.
EVALUATED_STATUSES: _Final = frozenset(
    {TrialStatus.COMPLETED, TrialStatus.MAX_ITERATIONS, TrialStatus.TIMEOUT, TrialStatus.LIMIT}
)


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """One trial as it ended (and, once scored, its evaluation)."""

    task_id: str
    trial: int
    status: TrialStatus
    output: Any = None
    evaluation: Evaluation | None = None
    error: str | None = None
    attempts: int = 1
    commits: int = 0
    started_at: float | None = None
    finished_at: float | None = None
    usage: Usage = NO_USAGE
    #: The trial's final state (what ``evaluate`` usually scores); not in ``to_dict``.
    state: Any = field(default=None, repr=False, compare=False)
    #: The trimmed traceback of the error that ended the trial (user frames first).
    traceback: str | None = field(default=None, repr=False, compare=False)
    #: Why scoring failed (``evaluate`` raised until its retries ran out), else None.
    #: Counted apart from trial errors: a crashed scorer is not a failed trial.
    evaluation_error: str | None = None
    #: The budget that ended a ``limit`` trial (``"token_limit"``, ``"cost_limit"`` or
    #: ``"working_time_limit"``), else None.
    limit: str | None = None
    #: Seconds the trial spent working (not queued, deferred or in backoff), as recorded.
    working_time: float | None = None
    # What the scorer is told of the task (filled in on the record ``evaluate`` gets;
    # the report's records leave them out, as they leave out states).
    #: The task id as written (``add``, never ``add@gpt-x``).
    task: str | None = field(default=None, compare=False)
    #: The model the trial ran on (None: the task names none).
    model: str | None = field(default=None, compare=False)
    #: The environment id that scores it.
    environment: str | None = field(default=None, compare=False)
    #: The task's own inputs (not its parents' outputs).
    inputs: Mapping[str, Any] = field(default_factory=_empty, repr=False, compare=False)
    #: The task's `BenchmarkTaskMetadata.target`.
    target: Any = field(default=None, repr=False, compare=False)
    #: The task's `BenchmarkTaskMetadata.metadata`.
    metadata: Mapping[str, Any] = field(default_factory=_empty, repr=False, compare=False)
    #: The trial's model calls counted per model (`corral.history.CallCounts`, from its
    #: terminal, and its evaluation's graders' under theirs; None: none recorded).
    model_calls: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def passed(self) -> bool:
        """Whether the trial counts as passed: its evaluation passed and it did not end
        ``limit`` (an over-budget trial is scored, but never counts as passed)."""
        evaluation = self.evaluation
        return evaluation is not None and bool(evaluation.passed) and self.status != "limit"

    def to_dict(self) -> dict[str, Any]:
        ev = self.evaluation
        return {
            "task_id": self.task_id,
            "trial": self.trial,
            "status": str(self.status),
            "output": self.output,
            "evaluation": None if ev is None else _evaluation_dict(ev),
            "error": self.error,
            "attempts": self.attempts,
            "commits": self.commits,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "usage": self.usage.to_dict(),
            "evaluation_error": self.evaluation_error,
            "traceback": self.traceback,
            "limit": self.limit,
            "working_time": self.working_time,
        }


def _evaluation_dict(ev: Evaluation) -> dict[str, Any]:
    out = {"score": ev.score, "passed": ev.passed, "details": dict(ev.details)}
    if ev.scores:  # absent without named scores, as before there were any
        out["scores"] = dict(ev.scores)
    return out
