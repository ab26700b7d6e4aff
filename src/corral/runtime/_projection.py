"""Rebuilding a trial's state from its commit history (the history's fold, and the
state, steps and turns the runtime resumes from)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import history
from .._types import UNCHANGED, Action, Commit, Step, ToolEffect, slot_builder
from ..history import CommitKind, Payload, TerminalPayload, TrialFold


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


# Each kind read once: reading an enum's member goes through its metaclass every time.
_SETUP = CommitKind.SETUP
_ACTION = CommitKind.ACTION
_TOOL_EFFECT = CommitKind.TOOL_EFFECT
_TERMINAL = CommitKind.TERMINAL
_REOPEN = CommitKind.REOPEN

# A trial's action, its effect and the step of both are folded in once each: each is
# built by `slot_builder`, the same value its frozen ``__init__`` makes, for less.
_action: Callable[[Any, Any], Action] = slot_builder(Action)
_effect: Callable[[Any, Any], ToolEffect] = slot_builder(ToolEffect)
_step: Callable[[Action, ToolEffect], Step] = slot_builder(Step)


class Projection(TrialFold):
    """What a history means: the fold's views (terminal, evaluation, usage, failed
    attempts), and the state, steps and turns of the latest attempt."""

    __slots__ = (
        "history",
        "has_setup",
        "state",
        "previous_trial",
        "steps",
        "iteration",
        "turn",
        "ended",
    )

    def __init__(self) -> None:
        super().__init__()
        #: The latest attempt's commits (from its ``reopen`` marker on).
        self.history: list[Commit] = []
        self.has_setup = False
        self.state: Any = None
        self.previous_trial: int | None = None
        self.steps: list[Step] = []
        self.iteration = 0
        self.turn: PendingTurn | None = None
        #: The latest attempt's terminal payload (that of the fold's `terminal`; as its
        #: writer gave it, so without its stamp: read that from the commit).
        self.ended: TerminalPayload | None = None

    def apply(self, commit: Commit, payload: Payload | None = None) -> None:
        """Fold ``commit`` in (``payload``: its typed payload, if the caller has it)."""
        TrialFold.apply(self, commit, payload)
        kind = commit.kind
        # The payload of ``kind``'s type (`SetupPayload` for a setup, ...): a writer's
        # own, or decoded here; not checked again (this runs for every commit).
        p: Any = payload
        if kind == _SETUP:
            if p is None:
                p = history.decode(commit)
            self.has_setup = True
            self.state = p.state
            self.previous_trial = p.previous_trial
        elif kind == _ACTION:
            if p is None:
                p = history.decode(commit)
            turn = self.turn
            if turn is None or p.turn != turn.number:
                if turn is not None:
                    self._close_turn()
                turn = self.turn = PendingTurn(p.turn, state_before=self.state)
                self.iteration = p.turn + 1
            turn.actions.append((commit.seq, _action(p.tool, p.arguments)))
        elif kind == _TOOL_EFFECT:
            turn = self.turn
            assert turn is not None, "tool_effect without an action"
            if p is None:
                p = history.decode(commit)
            turn.effects[p.action_seq] = _effect(p.observation, p.state)
            if not turn.missing:
                self._apply_turn(turn)
        elif kind == _TERMINAL:
            if self.turn is not None:
                self._close_turn()
            if p is None:
                p = history.terminal_of(commit)
            self.ended = p
            state = p.state
            if state is not UNCHANGED:
                self.state = state
        elif kind == _REOPEN:
            # A fresh attempt of a finished trial: it starts over from setup. The
            # history before the marker stays in the store, not in the session;
            # what it spent still counts (the fold's `earlier_usage`).
            self.history = []
            self.has_setup = False
            self.state = self.previous_trial = self.turn = self.ended = None
            self.steps = []
            self.iteration = 0
        self.history.append(commit)

    @property
    def worked(self) -> float:
        """Seconds of work the latest commit since the latest ``reopen`` recorded."""
        for commit in reversed(self.history):
            if commit.kind != CommitKind.EVALUATION:
                worked = history.worked_of(commit)
                if worked is not None:
                    return float(worked)
        return 0.0

    def _close_turn(self) -> None:
        """Apply a complete turn's effects: steps and states in declared order."""
        turn = self.turn
        if turn is not None and not turn.missing:
            self._apply_turn(turn)

    def _apply_turn(self, turn: PendingTurn) -> None:
        """Apply ``turn``, whose every action has its effect."""
        for seq, action in turn.actions:
            effect = turn.effects[seq]
            self.steps.append(_step(action, effect))
            if effect.state is not UNCHANGED:
                self.state = effect.state
        self.turn = None

    @property
    def open_turn(self) -> PendingTurn | None:
        """The latest turn if some of its actions still lack effects."""
        return self.turn if self.turn is not None and self.turn.missing else None
