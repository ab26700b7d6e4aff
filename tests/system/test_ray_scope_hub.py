"""The Ray executor's scope hub (`corral.executor._scopes`): a release is answered however
many acquires wait for the scope it frees, and a host that cannot reach the hub for a
moment asks again instead of stopping the run."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from typing import Any

import pytest

from corral.executor._dispatch import RayExecution
from corral.executor._owner import unreachable_errors
from corral.executor._scopes import SharedScopes, hub

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


class Lost:
    """A call Ray could not deliver: awaited (as a host does) or through its future (as
    the coordinator does), it raises ``error``."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __await__(self) -> Any:
        raise self.error
        yield  # a generator: awaitable

    def future(self) -> concurrent.futures.Future[None]:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        future.set_exception(self.error)
        return future


class Partitioned:
    """A real hub's handle, through which Ray loses calls as it does for an actor it
    cannot reach for the moment: ``lose_answers`` calls of each method run on the hub,
    their answers lost; ``lose_calls`` never reach it. Either way the caller gets
    ``ActorUnavailableError``, and cannot tell which it was."""

    def __init__(self, real: Any, lose_answers: dict[str, int], lose_calls: dict[str, int]):
        self.real, self.lose_answers, self.lose_calls = real, lose_answers, lose_calls
        self.calls: list[str] = []

    def __getattr__(self, method: str) -> Any:
        import ray

        outer = self

        class Method:
            def remote(self, *args: Any) -> Any:
                outer.calls.append(method)
                lost = ray.exceptions.ActorUnavailableError(f"injected: {method} lost", None)
                if outer.lose_calls.get(method, 0):
                    outer.lose_calls[method] -= 1
                    return Lost(lost)
                ref = getattr(outer.real, method).remote(*args)
                if outer.lose_answers.get(method, 0):
                    outer.lose_answers[method] -= 1

                    async def answer_lost() -> None:
                        await ref
                        raise lost

                    return answer_lost()
                return ref

        return Method()


@pytest.mark.parametrize("lost", ["answers", "calls"])
def test_a_host_that_cannot_reach_the_hub_for_now_asks_again_and_the_run_goes_on(
    lost: str,
) -> None:
    """Before, Ray's ActorUnavailableError on an acquire stopped the whole run as if
    the hub had died, and a release it hit was lost: its slot stayed taken for the
    rest of the run. Now each call goes again under its token: the slot is granted
    once, given back once, and the host carries on."""
    import ray

    scopes = hub(f"corral-scopes-test-{uuid.uuid4().hex}", create=True)
    lost_hub: list[BaseException] = []
    registry = SharedScopes("unused", 0, lost_hub.append, again=0.01)
    losses = {"acquire": 1, "release": 1}
    if lost == "answers":
        handle = Partitioned(scopes, lose_answers=losses, lose_calls={})
    else:
        handle = Partitioned(scopes, lose_answers={}, lose_calls=losses)
    registry._hub_handle = handle

    async def main() -> None:
        scope = registry.scope("api", 2)
        await asyncio.wait_for(scope.acquire(), 60)
        stats = await scopes.statistics.remote()
        assert stats["api"].in_use == 1  # once, however often it was asked
        scope.release()
        await asyncio.wait_for(registry.settle(), 60)
        stats = await scopes.statistics.remote()
        assert (stats["api"].in_use, stats["api"].peak) == (0, 1)

    try:
        asyncio.run(main())
    finally:
        ray.kill(scopes)
    assert lost_hub == []
    assert handle.calls == ["acquire", "acquire", "release", "release"]


def test_the_hub_forgets_a_dead_host_even_when_the_first_word_of_it_is_lost() -> None:
    """Before, the coordinator told the hub once that a host died: lost on the way, the
    dead host's slots stayed taken for the rest of the run (a small scope could end up
    all taken, and the run hang). Now it goes again with the coordinator's next reading
    of the hub."""
    import ray

    scopes = hub(f"corral-scopes-test-{uuid.uuid4().hex}", create=True)
    try:
        ray.get(scopes.acquire.remote("api", 1, (5, 0)), timeout=60)  # host 5 holds the slot
        handle = Partitioned(scopes, lose_answers={}, lose_calls={"forget": 1})
        coordinator = object.__new__(RayExecution)  # only its `_forget` and its memory
        coordinator._unreachable = unreachable_errors(ray)
        coordinator._unforgotten = set()
        coordinator._forget(handle, 5)  # lost
        assert coordinator._unforgotten == {5}
        coordinator._forget_again(handle)  # the next reading of the hub
        assert not coordinator._unforgotten and handle.calls == ["forget", "forget"]
        ray.get(scopes.acquire.remote("api", 1, (6, 0)), timeout=60)  # the slot came back
        assert ray.get(scopes.statistics.remote(), timeout=60)["api"].in_use == 1
    finally:
        ray.kill(scopes)


def test_a_stopping_host_waits_only_so_long_for_a_hub_out_of_reach() -> None:
    import ray

    scopes = hub(f"corral-scopes-test-{uuid.uuid4().hex}", create=True)
    registry = SharedScopes("unused", 0, lambda error: None, again=0.01)
    registry._hub_handle = Partitioned(scopes, lose_answers={}, lose_calls={"release": 10**9})

    async def main() -> None:
        scope = registry.scope("api", 1)
        await asyncio.wait_for(scope.acquire(), 60)
        scope.release()  # goes again and again: the hub is out of reach for good
        sent = set(registry._sent)
        await asyncio.wait_for(registry.settle(limit=0), 60)
        await asyncio.wait(sent)
        assert all(task.cancelled() for task in sent) and not registry._sent

    try:
        asyncio.run(main())
    finally:
        ray.kill(scopes)


def test_a_scope_used_with_another_limit_is_the_same_config_error_as_in_process() -> None:
    """Before, the hub's `ConfigError` reached the agent wrapped by Ray: the trial's error
    was ``RayTaskError(ConfigError)`` with the hub's traceback in terminal colours, where
    a run in this process records the one-line ``ConfigError``."""
    import ray

    import corral

    scopes = hub(f"corral-scopes-test-{uuid.uuid4().hex}", create=True)
    registries = [SharedScopes("unused", i, lambda error: None, again=0.01) for i in range(2)]
    for registry in registries:
        registry._hub_handle = scopes

    async def main() -> BaseException:
        await asyncio.wait_for(registries[0].scope("api", 1).acquire(), 60)
        try:
            await asyncio.wait_for(registries[1].scope("api", 2).acquire(), 60)
        except Exception as exc:
            return exc
        raise AssertionError("a second limit for one scope was accepted")

    try:
        error = asyncio.run(main())
    finally:
        ray.kill(scopes)
    in_process = corral.ConcurrencyScopes()
    in_process.scope("api", 1)
    with pytest.raises(corral.ConfigError) as local:
        in_process.scope("api", 2)
    assert type(error) is corral.ConfigError
    assert str(error) == str(local.value)
