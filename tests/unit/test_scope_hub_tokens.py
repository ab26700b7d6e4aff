"""The scope hub's calls may come more than once (a host Ray could not reach the hub
from for a moment sends a call again, not knowing whether the first one ran): each
token is granted a slot at most once, and none once its slot is over.

`ScopeHub` is the plain class the Ray actor wraps: driven here on one asyncio loop, as
the actor runs every call on its one loop."""

from __future__ import annotations

import asyncio

import pytest

from corral.executor._numbers import Numbers
from corral.executor._scopes import ScopeHub


def in_use(hub: ScopeHub, name: str = "api") -> int:
    return hub.statistics()[name].in_use


def test_an_acquire_asked_again_after_its_grant_takes_no_second_slot() -> None:
    """Before: the second call took a second slot for the same token (its answer was
    lost, so the host asked again), and the first was never given back."""

    async def main() -> None:
        hub = ScopeHub(0)
        await hub.acquire("api", 2, (0, 0))
        await hub.acquire("api", 2, (0, 0))  # asked again
        assert in_use(hub) == 1
        hub.release((0, 0))
        assert in_use(hub) == 0

    asyncio.run(main())


def test_an_acquire_asked_again_while_the_first_waits_gets_the_first_ones_answer() -> None:
    async def main() -> None:
        hub = ScopeHub(0)
        await hub.acquire("api", 1, (1, 0))  # another host holds the one slot
        first = asyncio.ensure_future(hub.acquire("api", 1, (0, 0)))
        await asyncio.sleep(0)  # the first call waits in the scope
        again = asyncio.ensure_future(hub.acquire("api", 1, (0, 0)))
        await asyncio.sleep(0)
        assert not first.done() and not again.done()
        hub.release((1, 0))
        await asyncio.wait_for(asyncio.gather(first, again), 5)
        assert in_use(hub) == 1
        assert hub.statistics()["api"].waiting == 0
        hub.release((0, 0))
        assert in_use(hub) == 0

    asyncio.run(main())


@pytest.mark.parametrize("ended_by", ["release", "abandon"])
def test_an_acquire_that_comes_after_its_slot_is_over_grants_nothing(ended_by: str) -> None:
    """A first call delayed on the way arrives after the call sent again was granted and
    given back: before, it took a slot that nobody would ever give back."""

    async def main() -> None:
        hub = ScopeHub(0)
        await hub.acquire("api", 1, (0, 3))
        getattr(hub, ended_by)((0, 3))
        await asyncio.wait_for(hub.acquire("api", 1, (0, 3)), 5)  # the late first call
        assert in_use(hub) == 0
        await asyncio.wait_for(hub.acquire("api", 1, (0, 4)), 5)  # the next token: granted
        assert in_use(hub) == 1

    asyncio.run(main())


def test_an_abandoned_token_whose_acquire_comes_later_grants_nothing() -> None:
    async def main() -> None:
        hub = ScopeHub(0)
        hub.abandon((0, 0))  # the host gave up before its acquire reached the hub
        await hub.acquire("api", 1, (0, 0))
        assert in_use(hub) == 0
        hub.abandon((0, 0))  # an abandon sent again changes nothing
        assert in_use(hub) == 0

    asyncio.run(main())


def test_an_abandon_stops_the_waiting_call_and_the_call_asked_again() -> None:
    async def main() -> None:
        hub = ScopeHub(0)
        await hub.acquire("api", 1, (1, 0))
        first = asyncio.ensure_future(hub.acquire("api", 1, (0, 0)))
        await asyncio.sleep(0)
        again = asyncio.ensure_future(hub.acquire("api", 1, (0, 0)))
        await asyncio.sleep(0)
        hub.abandon((0, 0))
        await asyncio.wait_for(asyncio.wait({first, again}), 5)
        assert first.cancelled() and again.result() is None
        hub.release((1, 0))
        assert in_use(hub) == 0  # the slot went to nobody

    asyncio.run(main())


def test_the_tokens_a_hub_keeps_stay_few_however_long_a_slot_is_held() -> None:
    """What the hub keeps to refuse a late acquire is the calls in flight: one slot held
    for the whole run (an outer scope) while thousands come and go costs nothing."""

    async def main() -> None:
        hub = ScopeHub(0)
        await hub.acquire("outer", 1, (0, 0))
        for n in range(1, 1_001):
            await hub.acquire("api", 1, (0, n))
            hub.release((0, n))
        seen = hub._seen[0]
        assert (seen.below, len(seen)) == (1_001, 0)
        assert in_use(hub, "outer") == 1
        hub.forget(0)
        assert 0 not in hub._seen and in_use(hub, "outer") == 0
        hub.abandon((0, 5))  # a dead host's late call keeps nothing
        assert 0 not in hub._seen

    asyncio.run(main())


def test_numbers_keep_a_mark_and_the_ones_above_it_out_of_order() -> None:
    seen = Numbers(first=0)
    assert seen.add(1) and 1 in seen and 0 not in seen and len(seen) == 1
    assert not seen.add(1)
    assert seen.add(0) and (seen.below, len(seen)) == (2, 0)
    assert not seen.add(0) and 0 in seen
