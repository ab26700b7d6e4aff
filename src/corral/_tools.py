"""`Tool`: what an environment says it executes, and the check of a call against it.

An environment that declares its tools (a ``tools`` attribute, or a
``tools(session)`` method) is only asked to execute calls that name one of
them with arguments its schema accepts; any other call gets an error
observation back, recorded like any effect, so a model sees its mistake
instead of the trial crashing.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ._errors import ConfigError
from ._schema import schema_errors

#: The key under which an agent records tool-call arguments that were not valid
#: JSON (their raw text), so the call and its error stay in the history.
INVALID_JSON = "__corral_invalid_json__"
#: The key under which an agent records why it refused a call the model made (the
#: text is the call's error observation; the call never reaches ``execute``).
REFUSED = "__corral_refused__"

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_NO_PARAMETERS: Mapping[str, Any] = MappingProxyType({"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool an environment executes: its name, what it does, and a JSON Schema
    of its arguments (an object)."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: _NO_PARAMETERS)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ConfigError(
                f"tool name must be 1-64 letters, digits, '_' or '-', not {self.name!r}"
            )
        if not isinstance(self.description, str):
            raise ConfigError(f"tool {self.name!r}: description must be a string")
        if not isinstance(self.parameters, Mapping):
            raise ConfigError(
                f"tool {self.name!r}: parameters must be a JSON Schema mapping, "
                f"not {self.parameters!r}"
            )
        try:  # a plain JSON copy: what is sent is what was checked
            plain = json.loads(json.dumps(self.parameters, default=_plain))
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"tool {self.name!r}: parameters are not JSON: {exc}") from None
        object.__setattr__(self, "parameters", plain)

    def to_openai(self) -> dict[str, Any]:
        """The tool as OpenAI-compatible chat APIs take it."""
        function: dict[str, Any] = {"name": self.name, "parameters": self.parameters}
        if self.description:
            function["description"] = self.description
        return {"type": "function", "function": function}


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{value!r} is not JSON")


def tools_of(environment: object, session: object) -> tuple[Tool, ...] | None:
    """The tools ``environment`` declares for this session, or None if it declares none."""
    declared = getattr(environment, "tools", None)
    if declared is None:
        return None
    if callable(declared):
        declared = declared(session)
    return check_tools(declared, environment)


def check_tools(declared: object, owner: object) -> tuple[Tool, ...]:
    if isinstance(declared, str | bytes | Mapping) or not isinstance(declared, Sequence):
        raise ConfigError(f"the tools of {owner!r} must be a sequence of Tool, not {declared!r}")
    seen: set[str] = set()
    for tool in declared:
        if not isinstance(tool, Tool):
            raise ConfigError(f"the tools of {owner!r} must be Tool objects, not {tool!r}")
        if tool.name in seen:
            raise ConfigError(f"the tools of {owner!r} name {tool.name!r} twice")
        seen.add(tool.name)
    return tuple(declared)


def call_error(tools: Sequence[Tool], tool: str, arguments: object) -> str | None:
    """Why a call of ``tool`` with ``arguments`` cannot run, or None if it can."""
    if isinstance(arguments, Mapping) and REFUSED in arguments:
        return f"error: {arguments[REFUSED]}"
    match = next((t for t in tools if t.name == tool), None)
    if match is None:
        names = ", ".join(t.name for t in tools) or "none"
        return f"error: unknown tool {tool!r}; the tools are: {names}"
    if isinstance(arguments, Mapping) and INVALID_JSON in arguments:
        text = str(arguments[INVALID_JSON])
        shown = text if len(text) <= 200 else text[:200] + "..."
        return f"error: the arguments of {tool!r} are not a valid JSON object: {shown}"
    problems = schema_errors(match.parameters, arguments)
    if problems:
        return f"error: invalid arguments for {tool!r}: {'; '.join(problems[:5])}"
    return None
