"""A host the coordinator told the hub to forget (Ray said it died) may live on a while,
cut off (the case the store's fence is for): its agents' acquires must not come back
as grants of slots the hub never gave, beside the slots live hosts hold."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from corral.executor._scopes import SharedScopes, hub

pytestmark = pytest.mark.usefixtures("ray_cluster")


def test_an_acquire_of_a_forgotten_host_is_not_taken_for_a_grant() -> None:
    import ray

    scopes = hub(f"corral-scopes-test-{uuid.uuid4().hex}", create=True)
    stopped: list[BaseException] = []
    registry = SharedScopes("unused", 0, stopped.append, again=0.01)  # host 0's registry
    registry._hub_handle = scopes

    async def main() -> None:
        told = asyncio.Event()
        registry.lost = lambda error: (stopped.append(error), told.set())
        scope = registry.scope("api", 1)
        acquiring = asyncio.ensure_future(scope.acquire())
        await asyncio.wait(
            {acquiring, asyncio.ensure_future(told.wait())},
            timeout=60,
            return_when=asyncio.FIRST_COMPLETED,
        )
        try:
            assert not acquiring.done(), "host 0 was handed the scope's one slot: host 1 has it"
            assert stopped  # the host stops its jobs instead
        finally:
            acquiring.cancel()

    try:
        ray.get(scopes.acquire.remote("api", 1, (1, 0)), timeout=60)  # host 1: the one slot
        ray.get(scopes.forget.remote(0), timeout=60)  # Ray said host 0 died; it lives on
        asyncio.run(main())
        assert ray.get(scopes.statistics.remote(), timeout=60)["api"].in_use == 1
    finally:
        ray.kill(scopes)
