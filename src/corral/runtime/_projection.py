"""Rebuilding a trial's state from its commit history: the one place that reads commits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._types import NO_USAGE, UNCHANGED, Action, Commit, Step, ToolEffect, Usage
from . import _attempt_errors


@dataclass(slots=True)
class PendingTurn:
    """The action commits of the latest turn, and which of them have effects."""

    number: int
    actions: list[tuple[int, Action]] = field(default_factory=list)  # (action seq, action)
    effects: dict[int, ToolEffect] = field(default_factory=dict)  # by action seq
    state_before: Any = None

    @property
    def missing(self) -> list[tuple[int, Action]]:
        return [(seq, a) for seq, a in self.actions if seq not in self.effects]


@dataclass(slots=True)
class Projection:
    """What a history means: state, steps, turns, and whether the trial has ended."""

    commits: list[Commit] = field(default_factory=list)
    has_setup: bool = False
    state: Any = None
    previous_trial: int | None = None
    steps: list[Step] = field(default_factory=list)
    iteration: int = 0
    turn: PendingTurn | None = None
    terminal: Commit | None = None
    evaluation: Commit | None = None
    #: Usage of the attempts before the latest ``reopen`` (their commits are not kept).
    earlier_usage: Usage = NO_USAGE
    #: Usage since the latest ``reopen`` (what budgets count).
    usage: Usage = NO_USAGE
    #: The errors of the attempts that failed and were retried (since the latest ``reopen``).
    failed_attempts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def next_seq(self) -> int:
        return self.commits[-1].seq + 1 if self.commits else 0

    @classmethod
    def of(cls, commits: list[Commit]) -> Projection:
        projection = cls()
        for commit in commits:
            projection.apply(commit)
        return projection

    def apply(self, commit: Commit) -> None:
        self.commits.append(commit)
        payload = commit.payload
        kind = commit.kind
        usage = commit.usage
        if usage is not NO_USAGE and usage:
            self.usage = self.usage + usage
        failed = _attempt_errors.recorded(commit)
        if failed:  # each such commit carries all so far
            self.failed_attempts = failed
        if kind == "setup":
            self.has_setup = True
            self.state = payload["state"]
            self.previous_trial = payload.get("previous_trial")
        elif kind == "action":
            if payload["turn"] != (self.turn.number if self.turn else -1):
                self._close_turn()
                self.turn = PendingTurn(payload["turn"], state_before=self.state)
                self.iteration = payload["turn"] + 1
            assert self.turn is not None
            action = Action(payload["tool"], payload["arguments"])
            self.turn.actions.append((commit.seq, action))
        elif kind == "tool_effect":
            assert self.turn is not None, "tool_effect without an action"
            effect = ToolEffect(
                payload["observation"], payload["state"] if "state" in payload else UNCHANGED
            )
            self.turn.effects[payload["action_seq"]] = effect
            if not self.turn.missing:
                self._close_turn()
        elif kind == "terminal":
            self._close_turn()
            self.terminal = commit
            if "state" in payload:
                self.state = payload["state"]
        elif kind == "evaluation":
            self.evaluation = commit  # a rescore appends another: the latest counts
        elif kind == "reopen":
            # A fresh attempt of a finished trial: it starts over from setup. The
            # history before the marker stays in the store, not in the session;
            # what it spent still counts.
            if self.usage:
                self.earlier_usage = self.earlier_usage + self.usage
            self.usage = NO_USAGE
            self.commits = [commit]
            self.has_setup = False
            self.state = self.previous_trial = self.turn = None
            self.steps = []
            self.failed_attempts = []
            self.iteration = 0
            self.terminal = self.evaluation = None

    @property
    def worked(self) -> float:
        """Seconds of work the latest commit since the latest ``reopen`` recorded."""
        for commit in reversed(self.commits):
            payload = commit.payload
            if isinstance(payload, dict) and "worked" in payload and commit.kind != "evaluation":
                return float(payload["worked"])
        return 0.0

    def _close_turn(self) -> None:
        """Apply a complete turn's effects: steps and states in declared order."""
        turn = self.turn
        if turn is None or turn.missing:
            return
        for seq, action in turn.actions:
            effect = turn.effects[seq]
            self.steps.append(Step(action, effect))
            if effect.state is not UNCHANGED:
                self.state = effect.state
        self.turn = None

    @property
    def open_turn(self) -> PendingTurn | None:
        """The latest turn if some of its actions still lack effects."""
        return self.turn if self.turn is not None and self.turn.missing else None
