"""`AgentSession`: what agents and environments see of one trial."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from .._chat import call_latency, endpoint_of
from .._checks import non_negative_int, non_negative_number
from .._errors import ConfigError
from .._tools import Tool
from .._types import NO_USAGE, BenchmarkTaskMetadata, Commit, Evaluation, Step, Usage
from ..history import DEFAULT_RECORD_CHARS
from ._model_calls import CallLog, PendingCall, as_sent, check_record_chars

if TYPE_CHECKING:
    from .._chat import ChatModel, ChatResponse, ThinkingBlock, ToolCall


class AgentSession:
    """One trial's view for its agent and environment.

    Corral updates ``state``, ``steps``, ``history`` and ``iteration`` after
    every durable commit. ``scratch`` is the agent's own per-trial dict (it is
    not recorded). Inside ``Environment.execute``, ``step_key`` is the
    idempotency key of the action being executed: the same on every
    re-execution, in any process. ``tools`` are the `Tool` objects the
    environment declares (None when it declares none). ``calls`` holds the model
    calls recorded (`record_model_call`, or a model passed through `chat`) until
    the trial's next commit carries them.
    """

    __slots__ = (
        "benchmark_id",
        "task_id",
        "trial",
        "attempt",
        "_metadata",
        "model",
        "inputs",
        "state",
        "steps",
        "history",
        "iteration",
        "previous_evaluation",
        "previous_state",
        "previous_trial",
        "previous_status",
        "scratch",
        "step_key",
        "tools",
        "calls",
        "_usage",
    )

    def __init__(
        self,
        *,
        benchmark_id: str,
        task_id: str,
        trial: int,
        metadata: BenchmarkTaskMetadata,
        inputs: Mapping[str, Any],
        attempt: int = 0,
        previous_evaluation: Evaluation | None = None,
        previous_state: Any = None,
        previous_trial: int | None = None,
        previous_status: str | None = None,
        calls: CallLog | None = None,
    ) -> None:
        self.benchmark_id = benchmark_id
        self.task_id = task_id
        self.trial = trial
        self.attempt = attempt
        self._metadata = metadata  # shown without the scorer's part (`metadata`)
        self.model = metadata.model
        self.inputs = inputs
        self.state: Any = None
        self.steps: list[Step] = []
        self.history: list[Commit] = []
        self.iteration = 0
        self.previous_evaluation = previous_evaluation
        self.previous_state = previous_state
        self.previous_trial = previous_trial
        #: How that trial ended (``"limit"``: it never counts as passed, whatever its
        #: evaluation says); None when there is none.
        self.previous_status = previous_status
        self.scratch: dict[str, Any] = {}
        self.step_key: str | None = None
        #: The tools the environment declares for this trial (None: it declares none).
        self.tools: tuple[Tool, ...] | None = None
        self.calls = CallLog() if calls is None else calls
        self._usage: Usage = NO_USAGE

    @property
    def metadata(self) -> BenchmarkTaskMetadata:
        """The task's metadata without its ``target`` and ``metadata``: they are the
        scorer's, and an agent never sees them. The copy without them is made when
        first read (``dataclasses.replace``, some thousands of instructions: most
        agents never read it, and a session is made every trial)."""
        metadata = self._metadata
        if metadata.target is not None or metadata.metadata:
            metadata = self._metadata = dataclasses.replace(metadata, target=None, metadata={})
        return metadata

    def __repr__(self) -> str:
        return (
            f"AgentSession({self.benchmark_id!r}, task={self.task_id!r}, trial={self.trial}, "
            f"attempt={self.attempt}, iteration={self.iteration})"
        )

    def record_usage(
        self, *, input_tokens: int = 0, output_tokens: int = 0, cost: float = 0.0
    ) -> None:
        """Add token and cost usage to the step being recorded (summed in the report).

        A step's tokens may add up to at most `MAX_TOKENS` each and its cost to at
        most `MAX_COST`; more is refused (`ConfigError` naming the value) and not added.
        """
        for name, value in (("input_tokens", input_tokens), ("output_tokens", output_tokens)):
            non_negative_int(name, value)
        cost = non_negative_number("cost", cost)
        self._usage = add_usage(self._usage, Usage(input_tokens, output_tokens, float(cost)))

    def record_model_call(
        self,
        messages: Sequence[Any],
        response: ChatResponse | None = None,
        *,
        model: str | None = None,
        endpoint: str | None = None,
        latency: float | None = None,
        text: str | None = None,
        reasoning: str | None = None,
        tool_calls: Sequence[ToolCall] = (),
        finish_reason: str | None = None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost: float = 0.0,
        error: str | None = None,
        record_chars: int = DEFAULT_RECORD_CHARS,
    ) -> None:
        """Record one call to a model in the trial's history: the ``messages`` sent
        and the reply (a `ChatResponse`, or its ``text``, ``reasoning``,
        ``tool_calls``, ``finish_reason`` and usage), the ``model`` and ``endpoint``
        asked, the ``latency`` in seconds (None: the response's own, if its client
        measured it). The record rides on the trial's next
        commit (its actions, a tool's effect, or its terminal): in the history once,
        or not at all if the process dies first. Only the messages beyond those the
        trial's previous call began with are stored; each string is capped at
        ``record_chars`` characters (32,768 by default), a cut one ending in
        `corral.history.TRUNCATED` and the count of what was left out; a response's
        thinking blocks are kept whole and signed, and so are its content blocks when
        it used a server tool (`ChatResponse.blocks`), for a resumed conversation to
        send back. Usage is not added to the trial's: call `record_usage` for that
        (`chat` does both).
        """
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise ConfigError(f"messages must be a list of messages, not {type(messages).__name__}")
        if latency is not None and not (isinstance(latency, int | float) and latency >= 0):
            raise ConfigError(f"latency must be a number of seconds >= 0, not {latency!r}")
        thinking: tuple[ThinkingBlock, ...] = ()
        parts: tuple[str, ...] = ()
        blocks: tuple[Any, ...] = ()
        if response is not None:
            thinking, parts, blocks = response.thinking, response.text_parts, response.blocks
            if latency is None:  # the request's own, when its client measured it
                latency = response.latency
            usage = response.usage
            text, reasoning = response.content, response.reasoning
            finish_reason, tool_calls = response.finish_reason, response.tool_calls
            counted = (
                usage.input_tokens,
                usage.output_tokens,
                usage.cost,
                response.cache_read_tokens,
                response.cache_write_tokens,
            )
        else:
            counted = (input_tokens, output_tokens, float(cost), 0, 0)
        log = self.calls
        failed, log.failed, log.sent = tuple(log.failed), [], []
        log.record(
            PendingCall(
                as_sent(messages),
                model,
                endpoint,
                text,
                reasoning,
                tuple(tool_calls),
                finish_reason,
                counted,
                None if latency is None else float(latency),
                failed,
                error,
                check_record_chars(record_chars),
                thinking,
                parts,
                blocks,
            )
        )

    def chat(self, model: ChatModel, *, record_chars: int = DEFAULT_RECORD_CHARS) -> RecordedModel:
        """``model`` with every call recorded (`record_model_call`) and its usage
        added (`record_usage`); a try that fails with a model's error (a rate limit,
        a 5xx, a timeout, a dropped connection) is recorded with the call after it.
        ``record_chars``: as `record_model_call`'s."""
        return RecordedModel(model, self, check_record_chars(record_chars))

    def take_usage(self) -> Usage:
        """The usage recorded since the last commit, which the next commit carries."""
        usage, self._usage = self._usage, NO_USAGE
        return usage

    def for_action(self, step_key: str) -> AgentSession:
        """A view for executing one action: its own ``step_key`` and usage, same trial."""
        view = object.__new__(AgentSession)
        for name in AgentSession.__slots__:
            setattr(view, name, getattr(self, name))
        view.step_key = step_key
        view._usage = NO_USAGE
        return view


#: The most tokens of each kind one step may record: the stores keep them as 64-bit
#: integers (SQLite INTEGER, PostgreSQL bigint).
MAX_TOKENS = 2**63 - 1
#: The most cost one step may record: far beyond any real bill, and small enough that
#: no sum over a run's steps overflows to infinity (which JSON cannot write).
MAX_COST = 1e15


def add_usage(total: Usage, more: Usage) -> Usage:
    """``total + more``, the usage of one step, or a `ConfigError` naming the part
    that a store cannot hold."""
    out = total + more
    for name, value, bound in (
        ("input_tokens", out.input_tokens, MAX_TOKENS),
        ("output_tokens", out.output_tokens, MAX_TOKENS),
        ("cost", out.cost, MAX_COST),
    ):
        if value > bound:
            added = f" (with {getattr(total, name)!r} recorded before)" if total else ""
            raise ConfigError(
                f"{name} {value!r}{added} is out of bounds: one step records at most {bound!r}"
            )
    return out


class RecordedModel:
    """A `ChatModel` whose calls the trial records (`AgentSession.chat`): each reply
    with its latency and usage (the usage recorded on the session too), each failed
    try kept until the call that follows it."""

    __slots__ = ("inner", "session", "record_chars")

    def __init__(
        self, inner: ChatModel, session: AgentSession, record_chars: int = DEFAULT_RECORD_CHARS
    ) -> None:
        if not callable(getattr(inner, "complete", None)):
            raise ConfigError(f"model must have an async complete() method, not {inner!r}")
        self.inner = inner
        self.session = session
        self.record_chars = record_chars

    @property
    def model(self) -> str:
        return self.inner.model

    async def complete(self, messages: Sequence[Mapping[str, Any]], **options: Any) -> ChatResponse:
        """The inner model's `complete`, recorded (``options``: its keywords)."""
        session = self.session
        log = session.calls
        inner = self.inner
        model = options.get("model") or getattr(inner, "model", None)
        endpoint = endpoint_of(inner)
        log.trying()
        start = anyio.current_time()
        try:
            response = await inner.complete(messages, **options)
        except Exception as exc:
            log.fail(exc, model, endpoint, messages)
            raise
        latency = call_latency(response, anyio.current_time() - start)
        usage = response.usage
        session.record_usage(
            input_tokens=usage.input_tokens, output_tokens=usage.output_tokens, cost=usage.cost
        )
        session.record_model_call(
            messages,
            response,
            model=model,
            endpoint=endpoint,
            latency=latency,
            record_chars=self.record_chars,
        )
        return response
