"""A trial's conversation with a chat model, rebuilt from its durable history only.

The inputs are the user turn, each recorded turn of actions is one assistant
message with its tool calls, and each recorded effect is the tool message
answering its call, with the text the model wrote beside those calls (where it
wrote it among them) and the thinking blocks it began that reply with (from the
model call recorded with them: Anthropic refuses a tool-use turn sent back without
its signed thinking), and the blocks of its server tools' uses and results (a web
search) where the reply had them. Nothing held in memory enters it, so a retried or resumed
attempt sends exactly the conversation an uninterrupted one would.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .. import history
from .._chat import CONTENT_BLOCKS, TEXT_PARTS, THINKING_BLOCKS
from .._tools import INVALID_JSON
from .._types import Evaluation
from ..history import ActionPayload, CommitKind, ModelCallPayload, ToolEffectPayload
from ..runtime import AgentSession

#: How the user turn begins its note on the previous trial (``reflect=True``).
REFLECTION = "Your previous attempt at this task"


def call_id(step_key: str) -> str:
    """The id of a recorded tool call: from its step key, so the same in every process
    (and shaped like OpenAI's own, ``call_`` and 24 characters)."""
    return "call_" + step_key.removeprefix("step-")[:24]


def user_message(session: AgentSession, reflect: bool = False) -> str:
    """The task as the user turn: ``inputs["prompt"]``, then the other inputs as JSON
    (a dependency's output among them); with ``reflect``, how the previous trial did."""
    inputs = dict(session.inputs)
    prompt = inputs.pop("prompt", None)
    parts = []
    if isinstance(prompt, str):
        parts.append(prompt)
    elif prompt is not None:
        inputs["prompt"] = prompt
    if inputs:
        parts.append("Inputs:\n" + json.dumps(inputs, indent=1, sort_keys=True, default=str))
    previous = session.previous_evaluation
    if reflect and previous is not None:
        parts.append(f"{REFLECTION} {_outcome(previous, session.previous_status)}.")
    return "\n\n".join(parts) or "(no inputs)"


#: How a trial that did not end with an answer ended, as the next trial is told.
_ENDED = {
    "max_iterations": "ran out of turns",
    "timeout": "ran out of time",
}


def _outcome(evaluation: Evaluation, status: str | None) -> str:
    """How the previous trial did: its score and verdict, as the report counts it (a
    trial over its budget never passes, whatever its evaluation says)."""
    if status == "limit":
        return (
            "went over its budget (tokens, cost or working time) and was stopped: it "
            f"does not count as passed, whatever it scored ({evaluation.score:g})"
        )
    verdict = "passed" if evaluation.passed else "did not pass"
    ended = f" after it {_ENDED[status]}" if status in _ENDED else ""
    return f"scored {evaluation.score:g} and {verdict}{ended}"


def conversation(
    session: AgentSession, system_prompt: str | None, user: str
) -> list[dict[str, Any]]:
    """The messages to send for the session's next turn."""
    messages: list[dict[str, Any]] = []
    if system_prompt:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": user})
    turns: list[list[tuple[int, ActionPayload]]] = []
    replies: list[ModelCallPayload | None] = []
    effects: dict[int, Any] = {}
    turn_no = None
    said: ModelCallPayload | None = None  # the model call that the next turn follows
    for commit in session.history:
        if commit.kind == CommitKind.ACTION:
            action = history.decode(commit)
            assert isinstance(action, ActionPayload)
            if action.turn != turn_no:
                turn_no = action.turn
                turns.append([])
                replies.append(said)
                said = None
            turns[-1].append((commit.seq, action))
        elif commit.kind == CommitKind.MODEL_CALL:
            call = history.decode(commit)
            assert isinstance(call, ModelCallPayload)
            said = call if call.error is None else said
        elif commit.kind == CommitKind.TOOL_EFFECT:
            effect = history.decode(commit)
            assert isinstance(effect, ToolEffectPayload)
            effects[effect.action_seq] = effect.observation
    for actions, reply in zip(turns, replies, strict=True):
        messages.append(_assistant(reply, [_tool_call(a) for _, a in actions]))
        for seq, action in actions:
            if seq in effects:  # every one, when the agent is asked
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call_id(str(action.step_key)),
                        "content": _text(effects[seq]),
                    }
                )
    return messages


def _assistant(reply: ModelCallPayload | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant turn of a recorded reply that made ``calls``."""
    if reply is None:
        return {"role": "assistant", "content": None, "tool_calls": calls}
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.text or None,
        "tool_calls": calls,
    }
    if reply.thinking:
        message[THINKING_BLOCKS] = [block.as_dict() for block in reply.thinking]
    parts = reply.text_parts
    if parts and len(calls) < len(parts):
        # Its text where the model wrote it among the calls (what follows the calls a
        # turn did not run, past `max_tool_calls`, after the last it did).
        message[TEXT_PARTS] = [*parts[: len(calls)], "".join(parts[len(calls) :])]
    if reply.blocks and (served := _served_blocks(reply.blocks, calls)) is not None:
        message[CONTENT_BLOCKS] = served
    return message


def _served_blocks(blocks: tuple[Any, ...], calls: list[dict[str, Any]]) -> list[Any] | None:
    """A reply's blocks (it used a server tool: `CONTENT_BLOCKS`), its tool uses under
    the ids this conversation gives its calls; None if they are not the calls it ran
    (past `max_tool_calls`: the turn is then sent as its text and calls say)."""
    uses = [i for i, block in enumerate(blocks) if block.get("type") == "tool_use"]
    if len(uses) != len(calls):
        return None
    out = [dict(block) for block in blocks]
    for i, call in zip(uses, calls, strict=True):
        if out[i].get("name") != call["function"]["name"]:
            return None
        out[i]["id"] = call["id"]
    return out


def _tool_call(payload: ActionPayload) -> dict[str, Any]:
    arguments = payload.arguments
    if isinstance(arguments, Mapping) and INVALID_JSON in arguments:
        text = str(arguments[INVALID_JSON])  # what the model wrote, as it wrote it
    else:
        text = json.dumps(arguments, ensure_ascii=False)
    return {
        "id": call_id(str(payload.step_key)),
        "type": "function",
        "function": {"name": payload.tool, "arguments": text},
    }


def _text(observation: Any) -> str:
    if isinstance(observation, str):
        return observation
    return json.dumps(observation, ensure_ascii=False)


def parse_arguments(text: str) -> dict[str, Any]:
    """A tool call's arguments as the action records them: the JSON object, or its raw
    text under a marker that the run answers with an error observation."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    return {INVALID_JSON: text}
