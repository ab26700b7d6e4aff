"""Tool-call arguments checked against the environment's declared JSON Schema in a
real run: a call the schema refuses never reaches ``execute``, its error is the
recorded observation."""

from __future__ import annotations

from typing import Any

import pytest

import corral
from corral import Action, Final
from corral import BenchmarkTaskMetadata as Meta
from corral.testing import FakeEnvironment, ScriptedAgent

pytestmark = pytest.mark.anyio

#: ``mode`` is the number 0 or 1, ``level`` the number 1: JSON's ``true`` and
#: ``false`` are not numbers.
MODE = corral.Tool(
    "set_mode",
    parameters={
        "type": "object",
        "properties": {"mode": {"enum": [0, 1]}, "level": {"const": 1}},
    },
)


async def observations_of(
    arguments: dict[str, Any], tool: corral.Tool = MODE
) -> tuple[list[Any], FakeEnvironment]:
    """Run one trial calling ``tool`` (``set_mode``) with ``arguments``: the observations
    its agent saw, and the environment."""
    env = FakeEnvironment()
    env.tools = (tool,)  # type: ignore[attr-defined]
    seen: list[Any] = []

    def decide(session: corral.AgentSession) -> Action | Final:
        if session.steps:
            seen.extend(step.effect.observation for step in session.steps)
            return Final(None)
        return Action(tool.name, arguments)

    runner = corral.CorralRunner(
        {"t": Meta("a", "e")}, {"a": ScriptedAgent(decide)}, {"e": env}, store=corral.MemoryStore()
    )
    report = await runner.run("modes")
    assert str(report.tasks["t"].trials[0].status) == "completed"
    return seen, env


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"mode": True}, "mode must be one of [0, 1], not True"),
        ({"mode": False}, "mode must be one of [0, 1], not False"),
        ({"level": True}, "level must be 1, not True"),
    ],
)
async def test_a_boolean_is_not_an_enum_or_const_number(arguments: Any, error: str) -> None:
    observations, env = await observations_of(arguments)
    assert env.executions == []
    assert observations == [f"error: invalid arguments for 'set_mode': {error}"]


async def test_a_number_the_schema_allows_reaches_the_environment() -> None:
    observations, env = await observations_of({"mode": 1, "level": 1.0})
    assert [e.action.arguments for e in env.executions] == [{"mode": 1, "level": 1.0}]
    assert observations == [{"tool": "set_mode", "arguments": {"mode": 1, "level": 1.0}}]


#: Exactly one of ``path`` and ``url``: ``oneOf`` refuses a call that gives both.
FETCH = corral.Tool(
    "fetch",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "url": {"type": "string"}},
        "oneOf": [{"required": ["path"]}, {"required": ["url"]}],
    },
)


async def test_one_of_refuses_a_call_that_matches_more_than_one() -> None:
    env = FakeEnvironment()
    env.tools = (FETCH,)  # type: ignore[attr-defined]
    calls = [{"path": "a"}, {"path": "a", "url": "b"}, {}]

    def decide(session: corral.AgentSession) -> Action | Final:
        if len(session.steps) == len(calls):
            return Final([step.effect.observation for step in session.steps])
        return Action("fetch", calls[len(session.steps)])

    runner = corral.CorralRunner(
        {"t": Meta("a", "e", max_iterations=4)},
        {"a": ScriptedAgent(decide)},
        {"e": env},
        store=corral.MemoryStore(),
    )
    trial = (await runner.run("fetches")).tasks["t"].trials[0]
    assert [e.action.arguments for e in env.executions] == [{"path": "a"}]
    refused = "error: invalid arguments for 'fetch': arguments matches none of the allowed schemas"
    assert trial.output[1:] == [
        "error: invalid arguments for 'fetch': arguments matches more than one of the "
        "schemas of oneOf",
        refused,
    ]


#: A pet that is a cat or a dog, as pydantic writes a discriminated union: its schemas
#: are references, which the check does not follow.
PET = corral.Tool(
    "adopt",
    parameters={
        "$defs": {
            "Cat": {"properties": {"kind": {"const": "cat"}}, "required": ["kind"]},
            "Dog": {"properties": {"kind": {"const": "dog"}}, "required": ["kind"]},
        },
        "type": "object",
        "properties": {
            "pet": {
                "oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
                "discriminator": {"propertyName": "kind"},
            }
        },
    },
)
#: An id of digits or a name in lowercase letters (``pattern`` is not checked).
KEY = corral.Tool(
    "lookup",
    parameters={
        "type": "object",
        "properties": {
            "key": {
                "oneOf": [
                    {"type": "string", "pattern": "^[0-9]+$"},
                    {"type": "string", "pattern": "^[a-z]+$"},
                ]
            }
        },
    },
)


@pytest.mark.parametrize(
    ("tool", "arguments"), [(PET, {"pet": {"kind": "cat"}}), (KEY, {"key": "abc"})]
)
async def test_one_of_with_schemas_it_does_not_check_lets_the_call_run(
    tool: corral.Tool, arguments: dict[str, Any]
) -> None:
    observations, env = await observations_of(arguments, tool)
    assert [e.action.arguments for e in env.executions] == [arguments]


#: Options named ``x_...`` (integers), a ``tag`` of any value, and nothing else.
OPTIONS = corral.Tool(
    "configure",
    parameters={
        "type": "object",
        "properties": {"tag": True},
        "patternProperties": {"^x_": {"type": "integer"}},
        "additionalProperties": False,
    },
)


async def test_properties_by_pattern_or_true_schema_are_not_unexpected() -> None:
    env = FakeEnvironment()
    env.tools = (OPTIONS,)  # type: ignore[attr-defined]
    calls = [{"x_depth": 2, "tag": [1]}, {"x_depth": "deep"}, {"y": 1}]

    def decide(session: corral.AgentSession) -> Action | Final:
        if len(session.steps) == len(calls):
            return Final([step.effect.observation for step in session.steps])
        return Action("configure", calls[len(session.steps)])

    runner = corral.CorralRunner(
        {"t": Meta("a", "e", max_iterations=4)},
        {"a": ScriptedAgent(decide)},
        {"e": env},
        store=corral.MemoryStore(),
    )
    trial = (await runner.run("options")).tasks["t"].trials[0]
    assert [e.action.arguments for e in env.executions] == [calls[0]]
    assert trial.output[1:] == [
        "error: invalid arguments for 'configure': x_depth must be of type integer, not string",
        "error: invalid arguments for 'configure': unexpected property 'y'",
    ]


@pytest.mark.parametrize(
    ("schema", "value", "valid"),
    [
        ({"anyOf": [True]}, 3, True),
        ({"anyOf": [False, {"type": "string"}]}, 3, False),
        ({"oneOf": [False, {"type": "integer"}]}, 3, True),
        ({"oneOf": [True, {"type": "integer"}]}, 3, False),
        ({"oneOf": [True, {"type": "integer"}]}, "x", True),
    ],
)
def test_boolean_schemas_in_any_of_and_one_of_are_checked(
    schema: dict[str, Any], value: object, valid: bool
) -> None:
    """JSON Schema's ``true`` (anything) and ``false`` (nothing) inside ``anyOf`` or
    ``oneOf``: the check raised AttributeError on them."""
    from corral._schema import schema_errors

    assert (schema_errors(schema, value) == []) is valid
