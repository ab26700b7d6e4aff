"""A keyed limit declared in tests only (per agent), passed to `Limits` through its
``declarations``: a new limit kind is one declaration, and nothing global changes."""

from __future__ import annotations

from corral.scheduler import KEYED_LIMITS, KeyedLimit, LimitPhase

BY_AGENT = KeyedLimit(
    "max_parallel_by_agent",
    LimitPhase.EXECUTION,
    lambda metas, eval_keys: [meta.agent_id for meta in metas],
    "by_agent",
    "agent",
    "agent id",
    "Executions of one agent",
    lambda known: {"solo", "pair", "slow", "fast"},
)

#: The built-in declarations and this one.
WITH_AGENT = (*KEYED_LIMITS, BY_AGENT)
