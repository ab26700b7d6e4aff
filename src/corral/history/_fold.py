"""The one fold of a trial's commits, in seq order, and the views derived from it.

A ``reopen`` commit starts the trial's latest attempt: the fold then describes what
follows it (its commits, terminal, evaluation, usage, failed attempts), but for
`spend`, which counts every attempt. A trial is `finished` (as the store sees it)
with a terminal after its latest reopen, and `finished_and_scored` (as a report and
a resume see it) once that terminal is also scored if its status is scored. Until
then a reopened trial's report counts its `standing` attempt: the latest that was.
A ``usage`` commit (what a cancelled run spent that no model call carried) folds as
any commit does: its usage, working time and failed attempts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self

from .._types import EVALUATED_STATUSES, NO_USAGE, Commit, Usage
from ._codec import (
    TERMINAL_SEQ,
    ChatMessage,
    chat_message,
    decode,
    failed_attempts_of,
    status_of,
)
from ._kinds import CommitKind
from ._payloads import (
    TRUNCATED,
    CallCounts,
    EvaluationPayload,
    ModelCallPayload,
    ReopenPayload,
    capped,
)

_REOPEN = CommitKind.REOPEN
_TERMINAL = CommitKind.TERMINAL
_EVALUATION = CommitKind.EVALUATION
_MODEL_CALL = CommitKind.MODEL_CALL


class TrialFold:
    """A trial's commits folded one by one (`apply`); each view is read at any time."""

    __slots__ = (
        "commits",
        "started_at",
        "usage",
        "earlier_usage",
        "terminal",
        "evaluation",
        "last_seq",
        "failed_attempts",
        "calls",
        "last_call_seq",
        "standing",
        "reopen_seq",
    )

    def __init__(self) -> None:
        #: How many commits the latest attempt has (the reopen marker included).
        self.commits = 0
        #: When the latest attempt's first commit was made.
        self.started_at = 0.0
        #: Usage since the latest ``reopen`` (what budgets count).
        self.usage: Usage = NO_USAGE
        #: Usage of the attempts before the latest ``reopen``.
        self.earlier_usage: Usage = NO_USAGE
        self.terminal: Commit | None = None
        #: The latest evaluation (a rescore appends another: the latest counts).
        self.evaluation: Commit | None = None
        self.last_seq = -1
        #: The errors of the attempts that failed and were retried (since the latest reopen).
        self.failed_attempts: Sequence[Mapping[str, Any]] = ()
        #: The model calls of every attempt counted per model, as usage is (a reopened
        #: trial's earlier calls were made and paid for; None: none recorded).
        self.calls: dict[str, CallCounts] | None = None
        #: The sequence number of the latest attempt's last model call (None: none).
        self.last_call_seq: int | None = None
        #: The latest earlier attempt that was `finished_and_scored`, as (terminal,
        #: evaluation, commits, started_at): what a report counts while the attempt a
        #: rerun reopened has not ended (a cancelled or crashed rerun never drops a
        #: trial from n), with `earlier_usage` and as of `reopen_seq`: its head is made
        #: at the reopen (and at a rescore of it), the new attempt's work writing none.
        #: None: no such attempt.
        self.standing: tuple[Commit, Commit | None, int, float] | None = None
        #: The sequence number of the latest ``reopen`` commit (-1: none).
        self.reopen_seq = -1

    @classmethod
    def of(cls, commits: Sequence[Commit]) -> Self:
        fold = cls()
        for commit in commits:
            fold.apply(commit)
        return fold

    def apply(self, commit: Commit, payload: Any = None) -> None:
        """Fold ``commit`` in (``payload``: its typed payload, if the caller has it)."""
        self.last_seq = commit.seq
        kind = commit.kind
        if kind == _REOPEN:
            if finished_and_scored(self.terminal, self.evaluation):
                assert self.terminal is not None
                self.standing = (self.terminal, self.evaluation, self.commits, self.started_at)
            self.reopen_seq = commit.seq
            if self.usage:
                self.earlier_usage = self.earlier_usage + self.usage
            self.usage = NO_USAGE
            self.commits = 0
            self.terminal = self.evaluation = None
            self.failed_attempts = ()
            self.last_call_seq = None  # the attempt's conversation starts afresh
        if not self.commits:
            self.started_at = commit.created_at
        self.commits += 1
        usage = commit.usage
        if kind == _EVALUATION and self._scores_another(commit):
            standing = self.standing
            if standing is not None and scored_terminal(commit) == standing[0].seq:
                # A rescore of the attempt the trial is counted with (not the new one's).
                terminal, _, commits, started_at = standing
                self.standing = (terminal, commit, commits, started_at)
            # Else it names a terminal no attempt ended with (a tampered store): no
            # verdict of any, though what it spent counts.
            if usage is not NO_USAGE and usage:  # spent on that attempt
                self.earlier_usage = self.earlier_usage + usage
            return
        if usage is not NO_USAGE and usage:
            self.usage = self.usage + usage
        if kind == _TERMINAL:
            self.terminal = commit
        elif kind == _EVALUATION:
            self.evaluation = commit
        elif kind == _MODEL_CALL:
            self.count_call(commit, payload if type(payload) is ModelCallPayload else None)
        if type(commit.payload) is dict and "failed_attempts" in commit.payload:
            failed = failed_attempts_of(commit)
            if failed:  # each such commit carries all so far
                self.failed_attempts = failed

    def _scores_another(self, evaluation: Commit) -> bool:
        """Whether ``evaluation`` names a terminal other than the latest attempt's (the
        standing attempt's: written by a rescore while the trial's new attempt had not
        ended), so is no verdict of the latest attempt."""
        named = scored_terminal(evaluation)
        return named is not None and (self.terminal is None or named != self.terminal.seq)

    def count_call(self, commit: Commit, payload: ModelCallPayload | None = None) -> None:
        """Count a model call (``payload``: its typed payload, if the caller has it)."""
        call = decode(commit) if payload is None else payload
        assert isinstance(call, ModelCallPayload)
        self.last_call_seq = commit.seq
        calls = self.calls if self.calls is not None else {}
        self.calls = calls
        _count(calls, call)

    @property
    def next_seq(self) -> int:
        """The sequence number the trial's next commit takes."""
        return self.last_seq + 1

    @property
    def spend(self) -> Usage:
        """Usage of every attempt (a reopened trial's earlier spend still counts)."""
        earlier = self.earlier_usage  # NO_USAGE but in a reopened trial: told without a call
        return self.usage + earlier if earlier is not NO_USAGE and earlier else self.usage

    @property
    def finished(self) -> bool:
        """The store's meaning: a terminal commit after the latest reopen."""
        return self.terminal is not None

    @property
    def finished_and_scored(self) -> bool:
        """The report's (and a resume's) meaning: see `finished_and_scored`."""
        return finished_and_scored(self.terminal, self.evaluation)


def finished_and_scored(terminal: Commit | None, evaluation: Commit | None) -> bool:
    """What a resume leaves alone: a terminal commit and, if its status is scored, an
    evaluation (a trial still to be scored is evaluated by the next run)."""
    if terminal is None:
        return False
    return evaluation is not None or status_of(terminal) not in EVALUATED_STATUSES


def latest_attempt(commits: list[Commit]) -> list[Commit]:
    """The commits after the last ``reopen`` marker: the attempt the report uses."""
    for i in range(len(commits) - 1, -1, -1):
        if commits[i].kind == _REOPEN:
            return commits[i + 1 :]
    return commits


def scored_terminal(commit: Commit) -> int | None:
    """The terminal an evaluation names as the one it scores (a rescore's of the attempt
    a reopened trial is counted with, its rerun unfinished); None: the latest one."""
    payload = commit.payload
    if commit.kind != _EVALUATION or type(payload) is not dict:
        return None
    seq = payload.get(TERMINAL_SEQ)
    return seq if type(seq) is int and seq >= 0 else None  # as its decoder reads it


def with_scorer_calls(
    calls: Mapping[str, CallCounts] | None, scored: EvaluationPayload
) -> Mapping[str, CallCounts] | None:
    """A trial's model calls per model (its terminal's, ``calls``) with those its scoring
    made (``scored``'s: a model-graded scorer's, counted under the grader's model)."""
    if not scored.model_calls:
        return calls
    out = dict(calls or {})
    for call in scored.model_calls:
        _count(out, call)
    return out


def _count(calls: dict[str, CallCounts], call: ModelCallPayload) -> None:
    """Add ``call`` to ``calls``, the counts per model."""
    model = call.model or "unknown"
    counted = counts_of(call)
    before = calls.get(model)
    calls[model] = counted if before is None else before + counted


def counts_of(call: ModelCallPayload) -> CallCounts:
    """One model call as counts: a call if it got a reply, its failed tries by kind,
    the seconds waited after those that were rate limits, its latency (a reply whose
    latency was not recorded is counted as untimed: it says nothing of how long)."""
    failed: dict[str, int] = {}
    waited = 0.0
    for f in call.failed:
        failed[f.kind] = failed.get(f.kind, 0) + 1
        if f.kind == "429" and f.waited:
            waited += f.waited
    replied = call.error is None
    untimed = int(replied and call.latency is None)
    return CallCounts(int(replied), failed, waited, call.latency or 0.0, untimed)


class CallChain:
    """The conversation of a trial's latest model call, each call's messages being a
    delta on the one before (`delta` makes one, `apply` reads one back)."""

    __slots__ = ("messages",)

    def __init__(self) -> None:
        self.messages: list[Any] = []

    @classmethod
    def of(cls, commits: Sequence[Commit]) -> CallChain:
        """The chain after ``commits`` (restarted at each ``reopen``)."""
        chain = cls()
        for commit in commits:
            if commit.kind == _MODEL_CALL:
                call = decode(commit)
                assert isinstance(call, ModelCallPayload)
                chain.apply(call)
            elif commit.kind == _REOPEN:
                chain.messages = []
        return chain

    def delta(self, sent: Sequence[Any], limit: int | None = None) -> tuple[int, list[Any]]:
        """How many of the previous call's messages ``sent`` begins with, and the rest.
        ``limit``: the recording cap; a message is the previous one too when its record
        is (the chain holds each message as it was recorded: a value cut at the cap, a
        tuple as a list)."""
        before = self.messages
        n = min(len(before), len(sent))
        keep = 0
        while keep < n and (
            sent[keep] is before[keep]
            or sent[keep] == before[keep]
            or (limit is not None and capped(sent[keep], limit)[0] == before[keep])
        ):
            keep += 1
        return keep, list(sent[keep:])

    def apply(self, call: ModelCallPayload) -> list[Any]:
        """Follow ``call``: its whole conversation (what a reader shows). A call that
        failed for good with nothing sent recorded (its failed tries only) leaves the
        chain as it was, as its writer did."""
        if sent_nothing(call):
            return self.messages
        keep = min(call.keep, len(self.messages))
        self.messages = self.messages[:keep] + list(call.messages)
        return self.messages


def sent_nothing(call: ModelCallPayload) -> bool:
    """Whether ``call`` failed for good with no message recorded as sent: it carries on
    no conversation, and shows none as its own."""
    return call.error is not None and not call.messages and not call.keep


@dataclass(frozen=True, slots=True)
class TranscriptCall:
    """One model call of a trial's transcript: the commit's ``seq`` and time, the call,
    and the messages it added to the conversation (``sent``; an assistant message that
    is the previous reply sent back is left out, shown once as that reply)."""

    seq: int
    created_at: float
    call: ModelCallPayload
    sent: tuple[ChatMessage, ...]
    #: How many messages the whole conversation of this call had.
    length: int
    #: The trial's attempt the call belongs to (1, then one more after each ``reopen``).
    attempt: int = 1
    #: A call scoring made, recorded with the evaluation commit ``seq`` (its
    #: messages whole: scorer calls share no conversation).
    scorer: bool = False


@dataclass(frozen=True, slots=True)
class TranscriptAttempt:
    """Where a trial reopened (``corral run --rerun`` or ``--retry-errors``) starts
    a fresh transcript: the ``reopen`` commit's ``seq`` and time, the attempt it
    begins, why (``reason``) and how the attempt before it ended."""

    seq: int
    created_at: float
    attempt: int
    reason: str | None
    previous_status: str | None


def transcript(commits: Sequence[Commit]) -> list[TranscriptCall | TranscriptAttempt]:
    """A trial's model calls in order, each ``reopen`` a `TranscriptAttempt` where
    the conversation starts again."""
    out: list[TranscriptCall | TranscriptAttempt] = []
    chain = CallChain()
    names: dict[str, str] = {}
    replied: ModelCallPayload | None = None  # the previous call, if it got a reply
    attempt = 1
    reopens: list[int] = []  # their seqs: which attempt a rescore's scorer calls were of
    for commit in commits:
        if commit.kind == _REOPEN:
            reopens.append(commit.seq)
            chain, replied = CallChain(), None
            attempt += 1
            why = decode(commit)
            assert isinstance(why, ReopenPayload)
            reason, previous = why.reason, why.previous_status
            out.append(
                TranscriptAttempt(
                    commit.seq,
                    commit.created_at,
                    attempt,
                    reason if isinstance(reason, str) else None,
                    previous if isinstance(previous, str) else None,
                )
            )
            continue
        if commit.kind == _EVALUATION:
            earlier = scored_terminal(commit)
            of = attempt if earlier is None else 1 + sum(r < earlier for r in reopens)
            out.extend(_scorer_calls(commit, of))
            continue
        if commit.kind != _MODEL_CALL:
            continue
        call = decode(commit)
        assert isinstance(call, ModelCallPayload)
        keep = min(call.keep, len(chain.messages))
        whole = [] if sent_nothing(call) else chain.apply(call)
        sent = []
        for index, raw in enumerate(whole[keep:]):
            message = chat_message(raw, names)
            if index == 0 and replied is not None and keep and _is_reply(message, replied):
                continue  # the previous reply, as the agent sends it back
            sent.append(message)
        for tool_call in call.tool_calls:
            names.setdefault(tool_call.id, tool_call.name)
        if not sent_nothing(call):  # else no step of the conversation: the reply before
            replied = call if call.error is None else None  # it is still the one sent back
        at = commit.created_at
        out.append(TranscriptCall(commit.seq, at, call, tuple(sent), len(whole), attempt))
    return out


def _is_reply(message: ChatMessage, reply: ModelCallPayload) -> bool:
    """Whether ``message`` is ``reply`` sent back (its text and tool calls, the calls'
    ids aside: an agent may number them its own way); anything else sent in its place
    is shown."""
    said = reply.text or ""
    if message.role != "assistant":
        return False
    if message.text != said:  # or the same, cut at the cap when it was recorded
        kept, cut, _ = message.text.partition("… " + TRUNCATED)
        if not cut or not said.startswith(kept):
            return False
    sent = [(c.name, _arguments(c.arguments)) for c in message.tool_calls]
    return sent == [(c.name, _arguments(c.arguments)) for c in reply.tool_calls]


def _arguments(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the decoder
        return text


def _scorer_calls(commit: Commit, attempt: int) -> list[TranscriptCall]:
    """The model calls an evaluation commit records (a graded-by-model scorer's)."""
    if type(commit.payload) is not dict or "model_calls" not in commit.payload:
        return []
    judged = decode(commit)
    assert isinstance(judged, EvaluationPayload)
    out = []
    for call in judged.model_calls:
        sent = tuple(chat_message(m, {}) for m in call.messages)
        at = commit.created_at
        out.append(TranscriptCall(commit.seq, at, call, sent, len(sent), attempt, scorer=True))
    return out
