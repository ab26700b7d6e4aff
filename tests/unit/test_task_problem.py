"""A stored task is checked in one expression when it is as Corral writes it; any
other entry gets the field-by-field verdict (the fast path never accepts more)."""

from __future__ import annotations

from typing import Any

import pytest

from corral.store._decode import task_problem

GOOD: dict[str, Any] = {
    "agent_id": "a",
    "environment_id": "e",
    "model": "m",
    "max_iterations": 3,
    "dependencies": ["t0"],
    "inputs": {"x": 1},
}


@pytest.mark.parametrize(
    "meta",
    [
        GOOD,
        {"environment_id": "e"},
        {**GOOD, "model": None},
        {**GOOD, "dependencies": []},
        {**GOOD, "max_iterations": (1 << 63) - 1},
    ],
)
def test_a_task_as_corral_writes_it_has_no_problem(meta: dict[str, Any]) -> None:
    assert task_problem("t", meta) is None


@pytest.mark.parametrize(
    ("meta", "named"),
    [
        ([GOOD], "not an object"),
        ({**GOOD, "environment_id": None}, "environment_id None"),
        ({k: v for k, v in GOOD.items() if k != "environment_id"}, "no environment_id"),
        ({**GOOD, "agent_id": 7}, "agent_id 7"),
        ({**GOOD, "model": 1.5}, "model 1.5"),
        ({**GOOD, "max_iterations": True}, "max_iterations True"),
        ({**GOOD, "max_iterations": 0}, "max_iterations 0"),
        ({**GOOD, "max_iterations": None}, "max_iterations None"),
        ({**GOOD, "max_iterations": 1 << 63}, "max_iterations"),
        ({**GOOD, "dependencies": ""}, "dependencies ''"),
        ({**GOOD, "dependencies": None}, "dependencies None"),
        ({**GOOD, "dependencies": ["t0", 3]}, "dependencies ['t0', 3]"),
        ({**GOOD, "dependencies": {}}, "dependencies {}"),
    ],
)
def test_any_other_entry_is_named_for_what_is_wrong(meta: Any, named: str) -> None:
    problem = task_problem("t", meta)
    assert problem is not None and named in problem, problem
