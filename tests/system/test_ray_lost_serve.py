"""A host's `serve` call Ray could not deliver (ActorUnavailableError: the actor may or
may not have run it) must not leave the host never ready: its polls would wait for good
and the run hang."""

from __future__ import annotations

import concurrent.futures
from pathlib import Path
from typing import Any

import anyio
import pytest

import corral

from ..support.ray_support import Boards, tasks
from .test_ray_faults import RUN, runner

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.usefixtures("ray_cluster"),
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),
]


class _LostCall:
    """A call Ray reports as not delivered (it never reached the actor)."""

    def __init__(self) -> None:
        import ray

        self.error = ray.exceptions.ActorUnavailableError("injected: serve lost", None)

    def future(self) -> concurrent.futures.Future[None]:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        future.set_exception(self.error)
        return future


class _LoseFirstServe:
    """``serve.remote()`` of the first host made is lost on the way; later ones go."""

    def __init__(self, real: Any) -> None:
        self.real, self.lost = real, False

    def remote(self, *args: Any) -> Any:
        actor = self.real.remote(*args)
        if not self.lost:
            self.lost = True
            method = actor.serve
            sent = {"n": 0}

            class Once:
                def remote(self) -> Any:
                    sent["n"] += 1
                    return _LostCall() if sent["n"] == 1 else method.remote()

            actor.serve = Once()
        return actor


class LosesAServe(corral.RayExecutor):
    def start(self, run: Any) -> Any:
        execution = super().start(run)
        execution._actor_class = _LoseFirstServe(execution._actor_class)
        return execution


async def test_a_hosts_serve_call_lost_on_the_way_does_not_hang_the_run(
    tmp_path: Path, boards: Boards
) -> None:
    board = boards.get(1)
    with anyio.fail_after(60):
        report = await runner(board, str(tmp_path / "store.db"), tasks(2)).run(
            "bench", **RUN, executor=LosesAServe(hosts=1)
        )
    assert report.counts["completed"] == 4
