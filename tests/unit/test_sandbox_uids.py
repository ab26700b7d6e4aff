"""Sandboxes started as root at once never share a uid (a process limit counts a uid's
processes), however the random draws fall."""

from __future__ import annotations

import pytest

from corral._sandbox import _own_uid
from corral._sandbox_setup import FIRST_UID, UIDS

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_sandboxes_running_at_once_hold_distinct_uids_though_the_draws_repeat() -> None:
    def same(n: int) -> int:
        return 7

    with _own_uid(same) as first, _own_uid(same) as second, _own_uid(same) as third:
        assert first == FIRST_UID + 7
        assert len({first, second, third}) == 3
    with _own_uid(same) as again:  # all were given back
        assert again == FIRST_UID + 7


async def test_the_last_uid_is_followed_by_the_first() -> None:
    def last(n: int) -> int:
        return n - 1

    with _own_uid(last) as one, _own_uid(last) as two:
        assert (one, two) == (FIRST_UID + UIDS - 1, FIRST_UID)
