"""The Ray executor's scope hub (`corral.executor._scopes`) under load: a release is
answered however many acquires wait for the scope it frees."""

from __future__ import annotations

import uuid

import pytest

from corral.executor._scopes import hub

pytestmark = pytest.mark.usefixtures("ray_cluster")

# More waiters than an async actor runs calls of one concurrency group at once (1,000).
WAITERS = 1_200


def test_a_release_is_answered_while_more_acquires_wait_than_the_hub_runs_at_once() -> None:
    """Before: every call shared one group of 1,000 places; 1,000 waiting acquires took
    them all, and the release that would wake the first never ran (a deadlock: the run
    hung at its hosts' next acquire)."""
    import ray

    scopes = hub(f"corral-scopes-test-{uuid.uuid4().hex}", create=True)
    try:
        ray.get(scopes.acquire.remote("api", 1, (0, 0)), timeout=60)
        waiting = {scopes.acquire.remote("api", 1, (1, i)): (1, i) for i in range(WAITERS)}
        holder = (0, 0)
        for _ in range(3):  # each release lets exactly one waiter in
            ray.get(scopes.release.remote(holder), timeout=60)
            done, _ = ray.wait(list(waiting), num_returns=1, timeout=60)
            assert len(done) == 1
            holder = waiting.pop(done[0])
        stats = ray.get(scopes.statistics.remote(), timeout=60)["api"]
        assert (stats.in_use, stats.peak) == (1, 1)
        assert not ray.wait(list(waiting), num_returns=1, timeout=0)[0]
    finally:
        ray.kill(scopes)
