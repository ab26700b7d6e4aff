"""Scoring one finished trial: its own phase, retried like an attempt, recorded once."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

import anyio

from .._checks import is_number
from .._errors import ConfigError
from .._json import DEFAULT_MAX_VALUE_BYTES, check_json
from .._protocols import Environment
from .._records import ScoringFacts, for_scorer, with_evaluation
from .._scoring_spend import SPENDING, Spent
from .._types import NO_USAGE, Evaluation, TrialRecord, TrialStatus, Usage, new_commit
from ..history import EvaluationPayload, ModelCallPayload, encode, evaluation_failed
from ..store._protocol import CommitStore, TrialKey
from ._acks import Acks
from ._ratelimit import as_rate_limit
from ._retry import RetryPolicy, error_fields, met_cancellation
from ._session import add_usage


async def evaluate_trial(
    environment: Environment,
    record: TrialRecord,
    *,
    key: TrialKey,
    seq: int,
    store: CommitStore,
    policy: RetryPolicy,
    acks: Acks,
    time_limit: float | None = None,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    facts: ScoringFacts | None = None,
    keep_state: bool = True,
    share: Callable[..., Evaluation] | None = None,
    terminal_seq: int | None = None,
) -> TrialRecord:
    """Score ``record`` and commit the evaluation (or the failure to produce one).

    ``time_limit`` bounds each call of ``evaluate``; a call that outlives it is a failed
    evaluation, not retried (a hung scorer would hang again). Details taking more than
    ``max_value_bytes`` of JSON are a failed evaluation too. Returns the record
    with ``evaluation`` (or ``error``) filled in. ``facts`` are what the scorer is told
    of the task (`for_scorer`); the record returned is ``record``'s own (its state
    kept or not, its `Evaluation` made by ``share`` if given: see `with_evaluation`).
    ``terminal_seq`` names the terminal scored when it is not the latest attempt's.
    """
    scored = for_scorer(record, facts)
    usage: Usage = NO_USAGE
    attempt = 0
    limited = 0
    while True:
        evaluation: object = None  # what this call returned, if it returned
        scope: anyio.CancelScope | None = None
        calls: Spent = [NO_USAGE]  # what its graders' calls spent (`Scorer.ask`)
        counting = SPENDING.set(calls)  # reset in the ``finally`` (see `Spent`)
        try:
            if time_limit is None:
                evaluation = await environment.evaluate(scored)
            else:
                with anyio.move_on_after(time_limit) as scope:
                    evaluation = await environment.evaluate(scored)
                if scope.cancelled_caught:
                    usage = _paid(usage, calls)
                    payload = _timed_out(time_limit, attempt)
                    break
            payload = _payload(evaluation, max_value_bytes)
            usage = _spent(usage, evaluation)
            break
        except Exception as raised:
            if scope is not None and scope.cancel_called and met_cancellation(raised):
                # Cut at its time limit, it raised as it stopped (a cleanup failing):
                # timed out all the same, and not retried. An error no cancellation
                # reached (past a call it could not cut) is its own, retried.
                usage = _paid(usage, calls)
                payload = _timed_out(time_limit, attempt)
                break
            exc: Exception = raised
            # What a refused or raising evaluation spent (a graded-by-model call) counts too.
            try:
                usage = _spent(usage, evaluation, calls)
            except ConfigError as bounds:
                exc = bounds
            if (slow_down := as_rate_limit(exc)) is not None:
                # Not a failed attempt: wait as asked (this evaluation keeps its slot).
                if (gave_up := policy.rate_limit_exhausted(slow_down, limited)) is None:
                    await anyio.sleep(policy.rate_limit_wait(slow_down.retry_after, limited))
                    limited += 1
                    continue
                exc = gave_up
            if policy.retryable(exc, attempt):
                await anyio.sleep(policy.delay(attempt))
                attempt += 1
                continue
            payload = evaluation_failed(error_fields(exc), attempts=attempt + 1)
            break
        finally:
            SPENDING.reset(counting)
    if record.status == TrialStatus.LIMIT:
        # Scored, but never a pass: said here too, for observers that see only this commit.
        payload = replace(payload, trial_status=str(TrialStatus.LIMIT))
    if terminal_seq is not None:  # an earlier attempt's (a rescore's, mid-rerun)
        payload = replace(payload, terminal_seq=terminal_seq)
    # What scoring spent (a model-graded scorer's calls) counts like any commit's usage.
    commit = ours = new_commit(seq, "evaluation", encode(payload), time.time(), usage)
    while True:
        try:
            handle = store.enqueue(key, [commit])
            # Not waited for: the run's acks tell the observers once it is durable,
            # and anything recorded later is durable only after it.
            acks.add(handle, key, [commit])
            break
        except Exception as exc:
            if not policy.retryable(exc, attempt):
                raise
            # The append may have landed before it failed: the store's history says, at
            # its sequence number (an earlier evaluation, before a reopen or a rescore,
            # is not this one).
            history = await store.history(key)
            landed = [c for c in history if c.seq == seq and c.kind == "evaluation"]
            if landed:
                commit = landed[0]
                acks.durable(key, [commit])
                break
            await anyio.sleep(policy.delay(attempt))
            attempt += 1
    return with_evaluation(
        record,
        commit,
        payload if commit is ours else None,
        task_id=key.task_id,
        keep_state=keep_state,
        share=share,
    )


def _timed_out(time_limit: float | None, attempt: int) -> EvaluationPayload:
    """The failed evaluation of a call of ``evaluate`` that outlived ``time_limit``."""
    text = f"TimeoutError: evaluate() exceeded evaluation_timeout of {time_limit} s"
    return evaluation_failed({"error": text, "error_type": "TimeoutError"}, attempts=attempt + 1)


def _spent(total: Usage, evaluation: object, calls: Spent | None = None) -> Usage:
    """``total`` and what ``evaluation`` says scoring spent: a call that returned one
    its retry cannot record (its details, say) was paid for all the same. A call that
    returned none (it raised, or timed out) spent what its graders' ``calls`` did."""
    if isinstance(evaluation, Evaluation):
        spent = evaluation.usage
    else:
        spent = calls[0] if calls is not None else NO_USAGE
    if spent is NO_USAGE or not isinstance(spent, Usage) or not spent:
        return total  # most scorers spend nothing
    return add_usage(total, spent)


def _paid(total: Usage, calls: Spent) -> Usage:
    """``total`` and what a timed-out call's graders spent (a sum past a store's bounds,
    which no store could hold, left out)."""
    try:
        return _spent(total, None, calls)
    except ConfigError:
        return total


def _payload(evaluation: object, limit: int) -> EvaluationPayload:
    if not isinstance(evaluation, Evaluation):
        raise TypeError(f"evaluate() returned {evaluation!r}, not an Evaluation")
    score = check_json(evaluation.score, "Evaluation.score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise TypeError(f"Evaluation.score must be a number, not {score!r}")
    if not isinstance(evaluation.passed, bool):
        raise TypeError(f"Evaluation.passed must be a bool, not {evaluation.passed!r}")
    details = check_json(evaluation.details, "Evaluation.details", limit)
    # Absent when there are none, as in histories written before named scores.
    scores = check_scores(evaluation.scores) if evaluation.scores else None
    if not isinstance(evaluation.usage, Usage):
        raise TypeError(f"Evaluation.usage must be a corral.Usage, not {evaluation.usage!r}")
    calls = evaluation.model_calls
    if not isinstance(calls, tuple) or (  # most have none: no generator per trial
        calls and not all(type(c) is ModelCallPayload for c in calls)
    ):
        shown = repr(calls)[:200]
        raise TypeError(
            "Evaluation.model_calls must be a tuple of corral.history.ModelCallPayload "
            f"(Scorer.ask makes them), not {shown}"
        )
    return EvaluationPayload(score, evaluation.passed, details, scores=scores, model_calls=calls)


def check_scores(scores: object) -> dict[str, float]:
    """``scores`` as stored: a mapping of names to finite numbers, else a TypeError."""
    if not isinstance(scores, Mapping):
        raise TypeError(f"Evaluation.scores must be a mapping of names to numbers, not {scores!r}")
    out: dict[str, float] = {}
    for name, value in scores.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"Evaluation.scores names must be non-empty strings, not {name!r}")
        if not is_number(value):
            raise TypeError(f"Evaluation.scores[{name!r}] must be a finite number, not {value!r}")
        out[name] = value
    return out
