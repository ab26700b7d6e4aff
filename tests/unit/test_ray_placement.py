"""Where the Ray executor puts a job: on a host whose long poll goes out anyway, when
that keeps the hosts near balance, and never past ``trials_per_host``; an evaluation
on the host that kept its trial's record, else on one that rebuilds it from the store."""

from __future__ import annotations

import math
import os
import random
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import corral
from corral import BenchmarkTaskMetadata, TrialRecord
from corral._records import TrialTable
from corral.executor._dispatch import RayExecution, _Host, choose
from corral.executor._wire import dumps, loads
from corral.executor._work import _unscored
from corral.runtime._jobs import EvalJob, TrialJob

ROOT = Path(__file__).resolve().parents[2]


def host(index: int, load: int, *, answered: bool) -> _Host:
    made = _Host.__new__(_Host)  # no actor: placement reads only the jobs and the poll
    made.index = index
    made.jobs = {(index, j): None for j in range(load)}  # type: ignore[misc]
    made.outbox = []
    made.poll = None if answered else object()
    return made


def test_a_host_that_answered_takes_the_job_while_near_the_lightest() -> None:
    polled, answered = host(0, 8, answered=False), host(1, 10, answered=True)
    assert choose([polled, answered], None) is answered
    # More than a quarter above the lightest: the lightest takes it (a submit call).
    polled, answered = host(0, 8, answered=False), host(1, 11, answered=True)
    assert choose([polled, answered], None) is polled
    # Nobody answered: the lightest.
    a, b = host(0, 3, answered=False), host(1, 2, answered=False)
    assert choose([a, b], None) is b
    # Of those that answered, the lightest.
    a, b, c = host(0, 5, answered=True), host(1, 4, answered=True), host(2, 4, answered=False)
    assert choose([a, b, c], None) is b


def test_a_full_host_takes_nothing_even_when_it_answered() -> None:
    polled, answered = host(0, 1, answered=False), host(1, 2, answered=True)
    assert choose([polled, answered], 3) is answered
    assert choose([polled, host(1, 2, answered=True)], 2) is polled


@pytest.mark.parametrize("seed", range(5))
def test_no_host_ever_holds_more_than_trials_per_host(seed: int) -> None:
    rng = random.Random(seed)
    cap = rng.randint(1, 6)
    hosts = [host(i, 0, answered=True) for i in range(rng.randint(2, 5))]
    job = 0
    for _ in range(3000):
        total = sum(len(h.jobs) for h in hosts)
        event = rng.random()
        if event < 0.5 and total < cap * len(hosts):  # admission bounds the total
            chosen = choose(hosts, cap)
            chosen.jobs[(-1, job)] = None  # type: ignore[assignment]
            job += 1
        elif event < 0.8 and total:
            busy = rng.choice([h for h in hosts if h.jobs])
            del busy.jobs[rng.choice(list(busy.jobs))]
        else:
            flipped = rng.choice(hosts)
            flipped.poll = object() if flipped.poll is None else None
        assert all(len(h.jobs) <= cap for h in hosts), [len(h.jobs) for h in hosts]
    assert job > 1000


def remote_with(hosts: list[_Host], *, cap: int | None) -> RayExecution:
    remote = RayExecution.__new__(RayExecution)  # no Ray: `submit` places jobs on these hosts
    remote.trials_per_host = cap
    remote.hosts = hosts
    remote._busy = 0
    remote._ran_on = {}
    remote._observed = False
    return remote


def evaluation(t: int, r: int) -> EvalJob:
    return EvalJob(t, r, f"t{t}", "env", None, 3)


def test_an_evaluation_goes_to_the_host_that_kept_its_record() -> None:
    ran, other = host(0, 0, answered=True), host(1, 0, answered=True)
    remote = remote_with([ran, other], cap=2)
    remote._ran_on[(0, 1)] = ran
    remote.submit(evaluation(0, 1))
    (job,) = ran.outbox
    assert isinstance(job, EvalJob) and job.record is None and job.seq == 3
    assert not other.outbox and remote.busy == 1


@pytest.mark.parametrize("why", ["full", "gone"])
def test_an_evaluation_elsewhere_reads_the_store_and_the_keeper_drops_its_record(
    why: str,
) -> None:
    ran, other = host(0, 2 if why == "full" else 0, answered=True), host(1, 0, answered=True)
    remote = remote_with([ran, other] if why == "full" else [other], cap=2)
    remote._ran_on[(0, 1)] = ran
    remote.submit(evaluation(0, 1))
    (job,) = other.outbox
    assert isinstance(job, EvalJob) and job.record is None  # the host reads the store
    assert ran.outbox == ([(0, 1)] if why == "full" else [])


def test_an_evaluation_admitted_with_a_trial_takes_its_keepers_last_room_first() -> None:
    """A trial's end admits the next trial and its evaluation together, the trial
    first (the local pool starts it at once); on Ray the evaluation still goes to the
    host that kept its record while that host has room, whatever the order."""
    ran, other = host(0, 1, answered=True), host(1, 1, answered=True)
    remote = remote_with([ran, other], cap=2)
    remote._ran_on[(0, 1)] = ran
    remote.flush = lambda: None  # type: ignore[method-assign]  # no actors to send to
    nxt = TrialJob(1, 0, "t1", BenchmarkTaskMetadata("a", "env"), {})
    remote.submit_all([nxt, evaluation(0, 1)])
    (job,) = ran.outbox
    assert isinstance(job, EvalJob) and job.record is None  # the keeper scores it
    assert other.outbox == [nxt]


class Keeping:
    """Two tool steps that change the state; remembers the record each evaluation was
    given (what a host keeps for it)."""

    def __init__(self) -> None:
        self.given: dict[tuple[str, int], TrialRecord] = {}

    async def setup(self, session: Any) -> int:
        return 0

    async def execute(self, action: corral.Action, session: Any) -> corral.ToolEffect:
        return corral.ToolEffect(observation=action.arguments["n"], state=session.state + 1)

    async def evaluate(self, trial: TrialRecord) -> corral.Evaluation:
        self.given[(trial.task_id, trial.trial)] = trial
        return corral.Evaluation(1.0, True)


class Stepping:
    async def act(self, session: Any) -> corral.Action | corral.Final:
        if session.iteration < 2:
            return corral.Action("step", {"n": session.iteration})
        return corral.Final({"done": session.iteration, "inputs": dict(session.inputs)})


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_record_rebuilt_from_the_store_is_the_one_the_trial_ended_with(
    tmp_path: Path,
) -> None:
    env = Keeping()
    store = corral.SQLiteStore(tmp_path / "store.db")
    tasks = {f"t{i}": BenchmarkTaskMetadata("agent", "env", inputs={"i": i}) for i in range(3)}
    runner = corral.CorralRunner(tasks, {"agent": Stepping()}, {"env": env}, store=store)
    await runner.run("bench", trials_per_task=2, max_parallel=4, max_parallel_per_task=2)
    assert len(env.given) == 6
    async with store.opened():
        for (task_id, trial), given in env.given.items():
            key = corral.TrialKey("bench", task_id, trial)
            history = await store.history(key)
            seq = next(c.seq for c in history if c.kind == "evaluation")
            rebuilt = _unscored(key, history[:seq])
            assert rebuilt == given and rebuilt.state == given.state == 2  # state: no __eq__


def test_results_share_the_evaluations_the_report_keeps() -> None:
    table = TrialTable(1)
    kept = corral.Evaluation(1.0, True)
    table.add(TrialRecord("t0", 0, corral.TrialStatus.COMPLETED, evaluation=kept))
    sent = [
        corral.Evaluation(1.0, True),
        corral.Evaluation(1, True),  # 1 and 1.0 are different JSON
        corral.Evaluation(-0.0, False),
        corral.Evaluation(1.0, True, {"why": "x"}),
    ]
    same, integer, negative, detailed = loads(dumps(sent), table.evaluation)
    assert same is kept
    assert integer == corral.Evaluation(1, True) and type(integer.score) is int
    assert math.copysign(1.0, negative.score) < 0 and negative.passed is False
    assert dict(detailed.details) == {"why": "x"} and detailed is not kept


def test_a_cloudpickled_batch_shares_the_evaluations_the_report_keeps() -> None:
    table = TrialTable(1)
    kept = corral.Evaluation(1.0, True)
    table.add(TrialRecord("t0", 0, corral.TrialStatus.COMPLETED, evaluation=kept))
    sent = [corral.Evaluation(1.0, True), lambda: 1]  # the lambda forces cloudpickle
    got = loads(dumps(sent), table.evaluation)
    assert got[0] is kept and got[1]() == 1


def test_a_batch_holding_an_object_of_a_module_sent_by_value_loads_where_it_is_not_importable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`corral run --executor ray` sends the benchmark file's code by value (hosts cannot
    import it). Before, a batch went through plain pickle, which pickled that file's
    classes by name: a deferred trial whose scratch held an object of one failed on its
    next host (``No module named 'corral_benchmark_...'``) and the run crashed."""
    from ray import cloudpickle

    name = "corral_benchmark_wire_test"
    module = types.ModuleType(name)
    exec("class Memo:\n    def __init__(self, n):\n        self.n = n\n", module.__dict__)
    monkeypatch.setitem(sys.modules, name, module)
    cloudpickle.register_pickle_by_value(module)
    try:
        batch = dumps([{"memo": module.Memo(1)}])
    finally:
        cloudpickle.unregister_pickle_by_value(module)
    monkeypatch.delitem(sys.modules, name)  # as on a host: the file cannot be imported
    (scratch,) = loads(batch)
    assert scratch["memo"].n == 1


@pytest.mark.slow  # starts a process: a system test
@pytest.mark.slow  # starts a process: a system test
def test_importing_corral_imports_neither_ray_nor_psycopg() -> None:
    """Only a run on Ray imports Ray, only a PostgreSQL store psycopg. Before, ``import
    corral`` imported Ray (a poll's answer, pickled at import, asked Ray's cloudpickle
    what it sends by value): every run paid for it at start, and Ray's exit hook, left
    in every process, imported more as the process exited, where a second Ctrl-C
    printed a traceback."""
    code = (
        "import sys, corral, corral.cli; print([m for m in ('ray', 'psycopg') if m in sys.modules])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        check=True,
    )
    assert out.stdout.strip() == "[]"
