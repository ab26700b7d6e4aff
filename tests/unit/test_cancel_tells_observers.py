"""A cancelled run still tells its observers, before ``on_run_end`` and in order, of every
commit the store acknowledges while the run stops.

Terminals and evaluations are not waited for: the run's acks tell the observers once the
store has them. A store that settles what it was handed as the run is cancelled (its
acknowledgements held until then) made them durable, yet the observers, and the final
progress line, counted fewer trials than the store held.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import anyio
import pytest
from trio.testing import MockClock

import corral
from corral import BenchmarkTaskMetadata, Commit, CorralRunner, Final, TrialKey
from corral.testing import FakeEnvironment, Gate, LaggingStore, wait_all_tasks_blocked

from ..support.cancelled_run import spend_on_a_call

pytestmark = pytest.mark.anyio

QUICK, SLOW = 3, 3
COUNTED = ("terminal", "evaluation")


class _Counting:
    """Hears every commit; counts terminals and evaluations, and what it had heard at
    ``on_run_end``."""

    def __init__(self) -> None:
        self.heard: list[tuple[TrialKey, int, str]] = []
        self.at_end: Counter[str] | None = None

    def counts(self) -> Counter[str]:
        return Counter(kind for _, _, kind in self.heard if kind in COUNTED)

    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        assert self.at_end is None, "told of a commit after on_run_end"
        self.heard.append((key, commit.seq, commit.kind))

    def on_run_end(self, info: Any) -> None:
        self.at_end = self.counts()


class _QuickOrHangs:
    """Task ``q*`` answers at once; task ``s*`` records a model call and waits inside
    ``act()`` (at ``inside``) until the run is cancelled."""

    def __init__(self) -> None:
        self.inside = Gate()  # never opened: ``waiting`` counts the hanging trials

    async def act(self, session: corral.AgentSession) -> Final:
        if session.task_id.startswith("s"):
            spend_on_a_call(session)
            await self.inside.wait()
        return Final("done")


def _run(store: LaggingStore, agent: _QuickOrHangs, observer: _Counting) -> CorralRunner:
    tasks = {f"q{i}": BenchmarkTaskMetadata("a", "e") for i in range(QUICK)}
    tasks |= {f"s{i}": BenchmarkTaskMetadata("a", "e") for i in range(SLOW)}
    return CorralRunner(
        tasks, {"a": agent}, {"e": FakeEnvironment()}, store=store, observers=[observer]
    )


async def _in_flight(store: LaggingStore, agent: _QuickOrHangs, observer: _Counting) -> None:
    """Keep the store up until the quick trials' terminals and evaluations are handed
    over and the slow agents wait inside act(): those appends stay in flight."""
    while True:
        await wait_all_tasks_blocked()
        handed = sum(c.kind == "evaluation" for h in store._histories.values() for c in h)
        if agent.inside.waiting == SLOW and handed == QUICK:
            break
        store.release()
    assert store.held and observer.counts()["terminal"] < QUICK


async def test_commits_acknowledged_as_a_cancelled_run_stops_reach_observers() -> None:
    store = LaggingStore()  # every append held until the test releases it
    agent, observer = _QuickOrHangs(), _Counting()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run(store, agent, observer).run, "b")
        await _in_flight(store, agent, observer)
        tg.cancel_scope.cancel()  # Ctrl-C
        with anyio.CancelScope(shield=True):
            # The run stops: the slow trials land their model calls, the store settles
            # what it was handed (every append, in order) before the run returns.
            while True:
                await wait_all_tasks_blocked()
                if observer.at_end is not None:
                    break
                store.release()

    held = [(key, c.seq, c.kind) for key, h in store._histories.items() for c in h]
    assert not store.held  # all of it acknowledged before the run returned
    durable = Counter(kind for _, _, kind in held if kind in COUNTED)
    assert durable == {"terminal": QUICK, "evaluation": QUICK}
    assert observer.at_end == durable
    # Each commit told once, each trial's in seq order.
    assert sorted(observer.heard, key=str) == sorted(held, key=str)
    for key in {key for key, _, _ in held}:
        seqs = [seq for k, seq, _ in observer.heard if k == key]
        assert seqs == sorted(seqs)


@pytest.mark.parametrize("anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=0)})])
async def test_a_cancelled_run_whose_store_never_acknowledges_still_stops_within_a_second() -> None:
    """The acks wait for the store only within the grace the trials have (SPEC 3.2)."""
    store = LaggingStore()
    agent, observer = _QuickOrHangs(), _Counting()
    async with anyio.create_task_group() as tg:
        tg.start_soon(_run(store, agent, observer).run, "b")
        await _in_flight(store, agent, observer)
        told = list(observer.heard)
        cancelled = anyio.current_time()
        tg.cancel_scope.cancel()
    assert anyio.current_time() - cancelled <= 1.0  # virtual time: the graces ran out
    assert store.held and observer.heard == told  # nothing acknowledged, nothing told


class _Fails:
    async def act(self, session: corral.AgentSession) -> Final:
        spend_on_a_call(session)
        raise RuntimeError("broken agent")


@pytest.mark.parametrize(("retries", "last"), [(0, "terminal"), (1, "model_call")])
async def test_what_a_failed_attempt_lands_as_the_run_is_cancelled_reaches_observers(
    retries: int, last: str
) -> None:
    """The attempt failed: the runtime writes its model call (before the retry's backoff,
    or with the ``error`` terminal when no retry is left) and waits for it; the run is
    cancelled meanwhile. The store settles it, durable, but the observers never heard
    of it."""
    store = LaggingStore()
    observer = _Counting()
    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": _Fails()},
        {"e": FakeEnvironment()},
        store=store,
        observers=[observer],
        retry_policy=corral.RetryPolicy(max_retries=retries),
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(runner.run, "b")
        while True:
            await wait_all_tasks_blocked()
            if any(c.kind == last for h in store._histories.values() for c in h):
                break
            store.release()
        assert store.held  # it waits for the store
        tg.cancel_scope.cancel()
        with anyio.CancelScope(shield=True):
            while observer.at_end is None:
                await wait_all_tasks_blocked()
                store.release()
    held = [(key, c.seq, c.kind) for key, h in store._histories.items() for c in h]
    assert [kind for _, _, kind in held] == ["setup", "model_call", "terminal"][: 3 - retries]
    assert observer.heard == held
