"""The demo's scripted "model": a `FakeChatServer` script that works the demo's
tasks through tool calls, as the simulated models would.

Each reply depends only on the request (the conversation, the model's name and
the trial's seed), like a model at temperature 0 with a seed, so a resumed or
retried trial gets the same answers. The server also misbehaves as real ones
do, deterministically: the first time it sees a request it may answer 429
(the run's adaptive limit backs off) or 500 (the attempt is retried), and the
small model's content filter refuses a few requests (HTTP 400, every time:
that trial ends in error).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
import threading
from typing import Any

from ..testing import ChatReply
from ._calculator import work_out
from ._chat import read_chat
from ._models import MODELS, Pace, careful
from ._search import bisect

#: The chances that a request seen for the first time is rate limited or fails.
RATE_LIMITED = 0.02
SERVER_ERROR = 0.02


class DemoModel:
    """The script of the demo's chat server (one per server: it remembers requests).
    ``latency`` scales the models' simulated latency (0: answer at once)."""

    def __init__(self, latency: float = 1.0) -> None:
        self.pace = Pace(latency)
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> ChatReply:
        digest = _digest(body)
        rng = random.Random(digest)
        with self._lock:
            first = digest not in self._seen
            self._seen.add(digest)
        model = MODELS.get(str(body.get("model")))
        if model is None:
            return ChatReply.failure(404, f"The model {body.get('model')!r} does not exist")
        roll = rng.random()
        if first and roll < RATE_LIMITED:
            return ChatReply.rate_limited(retry_after_ms=round(150 * self.pace.scale))
        if first and roll < RATE_LIMITED + SERVER_ERROR:
            return ChatReply.failure(500, "The server had an error processing your request")
        if roll > 1 - model.refusals:
            return ChatReply.failure(
                400,
                "Invalid prompt: this request was flagged by the content filter (simulated)",
                code="content_filter",
            )
        chat = read_chat(body)
        skill = careful(model.skill, chat.previous_failed)
        reply = bisect(chat, skill) if "high" in chat.inputs else work_out(chat, skill)
        # Tokens as a real model would count them: the whole request read, a few
        # dozen written (its reasoning too, which the reply does not show).
        read = len(json.dumps(body["messages"])) // 4 + len(json.dumps(body.get("tools"))) // 4
        usage = (read, rng.randint(18, 90))
        return dataclasses.replace(
            reply,
            usage=usage,
            delay=self.pace.seconds(model.latency, rng),
            reasoning=_thought(reply),
        )


def _thought(reply: ChatReply) -> str:
    """The reasoning the simulated model returns beside its reply (a transcript shows
    it folded): what it does next and why."""
    if reply.tool_calls:
        names = ", ".join(dict.fromkeys(name for name, _ in reply.tool_calls))
        many = len(reply.tool_calls)
        return (
            f"Not done yet: {many} tool call{'s' if many != 1 else ''} ({names}) next, "
            "then I read what they return."
        )
    return f"The conversation has what I need; I answer {reply.content!s}."


def _digest(body: dict[str, Any]) -> str:
    """A request's fingerprint without its tool-call ids, which derive from the
    benchmark id: every run of the demo meets the same faults."""
    messages = [
        (
            m.get("role"),
            m.get("content"),
            [
                (c["function"]["name"], c["function"]["arguments"])
                for c in m.get("tool_calls") or ()
            ],
        )
        for m in body["messages"]
    ]
    fingerprint = [body.get("model"), body.get("seed"), messages]
    return hashlib.sha256(json.dumps(fingerprint).encode()).hexdigest()


_LAST_NUMBER = re.compile(r"-?\d+")


def parse_answer(text: str) -> Any:
    """A model's final answer: its JSON, else the last number in its text, else the text."""
    text = text.strip()
    fenced = text.removeprefix("```json").removeprefix("```").removesuffix("```").strip()
    try:
        return json.loads(fenced)
    except ValueError:
        pass
    start = text.find("{")
    if start >= 0:
        try:
            return json.JSONDecoder().raw_decode(text[start:])[0]
        except ValueError:
            pass
    numbers = _LAST_NUMBER.findall(text)
    return int(numbers[-1]) if numbers else text
