"""`ToolAgent`: a chat model that calls the environment's tools until it answers."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Callable
from typing import Any

from .._chat import ChatModel, ChatResponse, without_password
from .._checks import flag, non_negative_number, positive_int
from .._errors import ConfigError
from .._tools import REFUSED
from .._types import Action, Final
from ..history import DEFAULT_RECORD_CHARS
from ..runtime import AgentSession
from ..runtime._model_calls import check_record_chars
from ._conversation import conversation, parse_arguments, user_message

#: The finish reasons of a reply cut off at a token limit (the call's max_tokens, or
#: the context window): OpenAI's, and Anthropic's.
CUT_OFF = frozenset({"length", "max_tokens", "model_context_window_exceeded"})


def _cut_in_last_call(response: ChatResponse) -> bool:
    """Whether the reply was cut off while its last tool call was written (nothing
    written after that call: the cut was not in text that followed it)."""
    parts = response.text_parts
    return response.finish_reason in CUT_OFF and not (parts and parts[-1])


class ToolAgent:
    """Asks ``model`` for each turn, offering the environment's `corral.Tool` list.

    The conversation is rebuilt from the trial's durable history on every turn
    (the inputs as the user turn, each recorded action as a tool call, each
    effect as its tool message), so a resumed or retried trial sends the same
    conversation and a recorded turn is never asked again. Several tool calls
    in one reply are one parallel turn; a reply without any is `Final` (its
    text, or ``parse_final(text)``). A call of an unknown tool, or with
    arguments that are not a JSON object its schema accepts, goes back to the
    model as an error observation; ``max_iterations`` bounds the turns. A reply
    runs at most ``max_tool_calls`` calls (64 by default): the call after them is
    answered with an error observation saying how many were not run. A reply cut
    off at its token limit (finish reason ``length`` or ``max_tokens``) while
    writing its last tool call does not run that call: its arguments may be
    incomplete, and the model is told so in its error observation. Usage and
    cost are recorded per turn.

    The task's ``model`` (when set) is the model asked, else the client's own.
    ``seed`` (an int) sends a seed derived from it and the (task, trial): trials
    sample apart, and a retry of one trial asks alike. ``reflect`` tells a
    trial how the previous trial of its task scored (see reflective trials);
    ``prompt(session)`` replaces the default user turn.
    """

    def __init__(
        self,
        model: ChatModel,
        system_prompt: str | None = None,
        max_tokens: int | None = None,
        temperature: float | None = None,
        parse_final: Callable[[str], Any] | None = None,
        *,
        seed: int | None = None,
        reflect: bool = False,
        prompt: Callable[[AgentSession], str] | None = None,
        max_tool_calls: int = 64,
        record_chars: int = DEFAULT_RECORD_CHARS,
    ) -> None:
        if not callable(getattr(model, "complete", None)):
            raise ConfigError(f"model must have an async complete() method, not {model!r}")
        if system_prompt is not None and not isinstance(system_prompt, str):
            raise ConfigError(f"system_prompt must be a string, not {system_prompt!r}")
        positive_int("max_tokens", max_tokens, or_none=True)
        if temperature is not None:
            non_negative_number("temperature", temperature)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ConfigError(f"seed must be an integer, not {seed!r}")
        positive_int("max_tool_calls", max_tool_calls)
        for name, value in (("parse_final", parse_final), ("prompt", prompt)):
            if value is not None and not callable(value):
                raise ConfigError(f"{name} must be callable, not {value!r}")
        self.model = model
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.parse_final = parse_final
        self.seed = seed
        self.reflect = flag("reflect", reflect)  # "no" read by its truth would reflect
        self.prompt = prompt
        self.max_tool_calls = max_tool_calls
        self.record_chars = check_record_chars(record_chars)

    def __repr__(self) -> str:
        return f"ToolAgent({self.model!r})"

    def generation_settings(self) -> dict[str, Any]:
        """What this agent generates with, recorded with each run: the model client, the
        model and endpoint it calls, and the sampling settings that are set (the system
        prompt by its hash)."""
        model = self.model
        base_url = getattr(model, "base_url", None)
        settings: dict[str, Any] = {
            "model": getattr(model, "model", None),
            "client": type(model).__name__,
            # Recorded with the run and shown in its report: a password in it masked.
            "base_url": without_password(base_url) if isinstance(base_url, str) else None,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
        }
        if self.system_prompt is not None:
            digest = hashlib.sha256(self.system_prompt.encode("utf-8", "surrogatepass"))
            settings["system_prompt_sha256"] = digest.hexdigest()[:16]
        return {k: v for k, v in settings.items() if isinstance(v, str | int | float)}

    def run_context(self, info: Any) -> Any:
        """The model's run-scoped resources (its connection pool), if it has any."""
        hook = getattr(self.model, "run_context", None)
        return hook(info) if callable(hook) else contextlib.nullcontext()

    def messages(self, session: AgentSession) -> list[dict[str, Any]]:
        """The conversation this session's next turn sends."""
        user = self.prompt(session) if self.prompt else user_message(session, self.reflect)
        return conversation(session, self.system_prompt, user)

    def trial_seed(self, session: AgentSession) -> int | None:
        if self.seed is None:
            return None
        raw = f"{self.seed}|{len(session.task_id)}:{session.task_id}|{session.trial}"
        return int(hashlib.sha256(raw.encode()).hexdigest()[:8], 16) & 0x7FFFFFFF

    async def act(self, session: AgentSession) -> list[Action] | Final:
        tools = session.tools or ()
        # Through the session: the call is recorded in the trial's history (messages,
        # reply, text beside its tool calls, failed tries) and its usage added.
        response = await session.chat(self.model, record_chars=self.record_chars).complete(
            self.messages(session),
            tools=[tool.to_openai() for tool in tools] or None,
            model=session.model,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            seed=self.trial_seed(session),
        )
        calls = response.tool_calls
        if calls:
            bound = self.max_tool_calls
            actions = [Action(call.name, parse_arguments(call.arguments)) for call in calls[:bound]]
            if len(calls) <= bound and _cut_in_last_call(response):
                # Its arguments as far as they were written (valid JSON, when the
                # provider sends the parameters it finished): never run.
                why = (
                    "the reply was cut off at its token limit (finish_reason "
                    f"{response.finish_reason!r}) while this call was being written: its "
                    "arguments may be incomplete, so it was not run"
                )
                actions[-1] = Action(calls[-1].name, {**actions[-1].arguments, REFUSED: why})
            if len(calls) > bound:  # thousands of calls must not mean thousands of executions
                why = (
                    f"too many tool calls in one reply: {len(calls)}, the most is {bound} "
                    f"(max_tool_calls); the {len(calls) - bound} after the first {bound} "
                    "were not run"
                )
                actions.append(Action(calls[bound].name, {REFUSED: why}))
            return actions
        text = response.content or ""
        return Final(text if self.parse_final is None else self.parse_final(text))
