"""Scoring one finished trial: its own phase, retried like an attempt, recorded once."""

from __future__ import annotations

import time
from dataclasses import replace

import anyio

from .._json import DEFAULT_MAX_VALUE_BYTES, check_json
from .._protocols import Environment
from .._records import with_evaluation
from .._types import Commit, Evaluation, TrialRecord, TrialStatus
from ..history import EvaluationPayload, encode, evaluation_failed
from ..store._protocol import CommitStore, TrialKey
from ._acks import Acks
from ._ratelimit import as_rate_limit
from ._retry import RetryPolicy, error_fields


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
) -> TrialRecord:
    """Score ``record`` and commit the evaluation (or the failure to produce one).

    ``time_limit`` bounds each call of ``evaluate``; a call that outlives it is a failed
    evaluation, not retried (a hung scorer would hang again). Details taking more than
    ``max_value_bytes`` of JSON are a failed evaluation too. Returns the record
    with ``evaluation`` (or ``error``) filled in.
    """
    attempt = 0
    limited = 0
    while True:
        try:
            if time_limit is None:
                evaluation = await environment.evaluate(record)
            else:
                with anyio.move_on_after(time_limit) as scope:
                    evaluation = await environment.evaluate(record)
                if scope.cancelled_caught:
                    text = f"TimeoutError: evaluate() exceeded evaluation_timeout of {time_limit} s"
                    payload = evaluation_failed(
                        {"error": text, "error_type": "TimeoutError"}, attempts=attempt + 1
                    )
                    break
            payload = _payload(evaluation, max_value_bytes)
            break
        except Exception as exc:
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
    if record.status == TrialStatus.LIMIT:
        # Scored, but never a pass: said here too, for observers that see only this commit.
        payload = replace(payload, trial_status=str(TrialStatus.LIMIT))
    commit = ours = Commit(seq, "evaluation", encode(payload), time.time())
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
            # The append may have landed before it failed: the store's history says.
            landed = [c for c in await store.history(key) if c.kind == "evaluation"]
            if landed:
                commit = landed[-1]
                acks.durable(key, [commit])
                break
            await anyio.sleep(policy.delay(attempt))
            attempt += 1
    return with_evaluation(record, commit, payload if commit is ours else None)


def _payload(evaluation: object, limit: int) -> EvaluationPayload:
    if not isinstance(evaluation, Evaluation):
        raise TypeError(f"evaluate() returned {evaluation!r}, not an Evaluation")
    score = check_json(evaluation.score, "Evaluation.score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        raise TypeError(f"Evaluation.score must be a number, not {score!r}")
    if not isinstance(evaluation.passed, bool):
        raise TypeError(f"Evaluation.passed must be a bool, not {evaluation.passed!r}")
    details = check_json(evaluation.details, "Evaluation.details", limit)
    return EvaluationPayload(score, evaluation.passed, details)
