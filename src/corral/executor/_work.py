"""One job run to its result: the part of running work every executor shares.

The same code runs a trial or an evaluation in this process (`LocalExecutor`)
and on a Ray host; only what the place supplies differs (its store
connection, its acknowledgements), and whether records cross a process
(``remote``: a trial's record stays where it ran until its evaluation, and
records travel without their states).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from .._errors import NotSerializableError
from .._records import with_evaluation
from .._types import EVALUATED_STATUSES, Commit, Evaluation, TrialRecord
from ..runtime._acks import Acks
from ..runtime._evaluate import evaluate_trial
from ..runtime._jobs import (
    Deferred,
    EvalJob,
    Evaluated,
    Executed,
    Job,
    Postponed,
    Result,
    TrialJob,
)
from ..runtime._trial import TrialPlan, load_previous, run_trial
from ..store._protocol import CommitStore, TrialKey
from ..store._summary import SummaryBuilder
from ._protocol import Work
from ._wire import dumps

_tuple_new = tuple.__new__


class JobRunner:
    """Runs jobs of one run with ``store`` and ``acks`` (see the module's note)."""

    __slots__ = ("_ended", "acks", "remote", "share", "store", "work")

    def __init__(
        self,
        work: Work,
        store: CommitStore,
        acks: Acks,
        *,
        remote: bool,
        share: Callable[..., Evaluation] | None = None,
    ) -> None:
        self.work = work
        self.store = store
        self.acks = acks
        self.remote = remote
        #: Makes each evaluated record's `Evaluation` (the run's report shares equal
        #: ones, and keeps a record made with it as it is); None across a process.
        self.share = share
        #: ``remote``: records of trials run here, until their evaluation comes, by (t, r).
        self._ended: dict[tuple[int, int], TrialRecord] = {}

    def drop(self, t: int, r: int) -> None:
        """Trial (t, r)'s evaluation runs elsewhere: forget the record kept for it."""
        self._ended.pop((t, r), None)

    def run(self, job: Job) -> Coroutine[Any, Any, Result]:
        """The job's run, to await: its execution's or its evaluation's own coroutine
        (not one awaiting it, whose frame every resumption of the job would pass)."""
        # ``TrialKey(...)``: a named tuple's ``__new__`` is a Python function behind a
        # type call; the tuple it makes is built here directly, twice a trial.
        key: TrialKey = _tuple_new(TrialKey, (self.work.benchmark_id, job.task_id, job.r))
        if isinstance(job, TrialJob):
            return self._execute(job, key)
        return self._evaluate(job, key)

    async def _execute(self, job: TrialJob, key: TrialKey) -> Result:
        work, meta = self.work, job.metadata
        if job.reload is not None:
            job.previous = await load_previous(self.store, key, job.reload)
            job.reload = None
        plan = TrialPlan(
            job=job,
            key=key,
            agent=work.agents[meta.agent_id],
            environment=work.environments[meta.environment_id],
            store=self.store,
            policy=work.policy,
            trial_timeout=work.trial_timeout,
            acks=self.acks,
            max_value_bytes=work.max_value_bytes,
            unsendable=_unsendable if self.remote else None,
        )
        outcome = await run_trial(plan)
        if isinstance(outcome, Deferred):
            # It continues later from the store's head, with the inputs it already had.
            job.may_have_history = True
            job.first_attempt = outcome.attempt
            job.deferrals += 1
            return Postponed(job, outcome)
        record: TrialRecord | None = outcome.record
        assert record is not None
        status, output = record.status, record.output
        if self.remote and status in EVALUATED_STATUSES:
            # Kept here for its evaluation, which the coordinator sends here if it can.
            self._ended[(job.t, job.r)] = record
            record = None
        return Executed(job.t, job.r, status, output, outcome.next_seq, record)

    async def _evaluate(self, job: EvalJob, key: TrialKey) -> Result:
        record = job.record or self._ended.pop((job.t, job.r), None)
        if record is None or job.may_have_history:
            # Its execution ran elsewhere (or where something died), or it was sent
            # again after its host died and may have landed: the store tells.
            history = await self.store.history(key)
            if record is None:
                record = _unscored(key, history[: job.seq])
            if len(history) > job.seq and history[job.seq].kind == "evaluation":
                landed = with_evaluation(
                    record,
                    history[job.seq],
                    task_id=key.task_id,
                    keep_state=False,
                    share=self.share,
                )
                return Evaluated(job.t, job.r, landed, record.state)
        work = self.work
        evaluated = await evaluate_trial(
            work.environments[job.environment_id],
            record,
            key=key,
            seq=job.seq,
            store=self.store,
            policy=work.policy,
            acks=self.acks,
            time_limit=work.evaluation_timeout,
            max_value_bytes=work.max_value_bytes,
            facts=job.facts,
            keep_state=False,
            share=self.share,
            terminal_seq=job.terminal_seq,
        )
        # The state apart (the report keeps records without one, and across a process
        # a record travels without it).
        return Evaluated(job.t, job.r, evaluated, record.state)


def _unsendable(scratch: dict[str, Any]) -> NotSerializableError | None:
    """Why a deferred trial's scratch cannot go back to the coordinator, or None."""
    try:
        dumps(scratch)
    except Exception as exc:  # whatever pickling a value of the agent's raised
        return NotSerializableError(
            f"session.scratch cannot be pickled ({type(exc).__name__}: {exc}), so the "
            "trial cannot wait out its rate limit off this Ray host; keep live objects "
            "(clients, locks) out of scratch"
        )
    return None


def _unscored(key: TrialKey, history: list[Commit]) -> Any:
    """The record a scorer is given, from the trial's commits before its evaluation."""
    builder = SummaryBuilder(key.task_id, key.trial)
    for commit in history:
        builder.add(commit)
    return builder.build().record()
