"""A Ray host's jobs run in a context like an ``anyio.run``'s (Ray's event loop gives none)."""

from __future__ import annotations

import asyncio

import pytest
import sniffio
from anyio._backends._asyncio import find_root_task

from corral import ConfigError
from corral.executor._host import _as_a_run


def test_a_hosts_serve_context_names_the_library_and_the_root_task() -> None:
    seen: dict[str, object] = {}

    async def serve() -> None:  # as `Host.serve`, a task of a loop anyio did not start
        _as_a_run()
        seen["library"] = sniffio.current_async_library_cvar.get()
        seen["root"] = find_root_task() is asyncio.current_task()

    async def main() -> None:
        await asyncio.get_running_loop().create_task(serve())
        seen["outside"] = sniffio.current_async_library_cvar.get()

    asyncio.run(main())
    # sniffio need not look for a task on every anyio call; anyio need not scan every
    # task for a root on every `to_thread.run_sync`; the caller's context is untouched.
    assert seen == {"library": "asyncio", "root": True, "outside": None}


class _NoDriver:
    """A run's store as a host without its driver opens it."""

    def open(self) -> object:
        raise ConfigError("PostgresStore needs psycopg: pip install 'corral[postgres]'")


def test_a_host_whose_store_cannot_open_fails_its_calls_instead_of_leaving_them_waiting() -> None:
    """`serve` raised before it could say it had stopped: `exchange` and `close` waited
    for it for good (the run hung)."""
    from ray import cloudpickle

    from corral.executor._host import Host, HostSpec
    from corral.executor._wire import dumps

    host = Host(cloudpickle.dumps(HostSpec(None, _NoDriver(), "hub")), 0)  # type: ignore[arg-type]

    async def main() -> None:
        with pytest.raises(ConfigError):
            await host.serve()
        assert host._event("ready").is_set() and host._event("stopped").is_set()
        with pytest.raises(ConfigError, match="needs psycopg"):
            await host.exchange(1, dumps([]))
        await host.close()

    asyncio.run(main())


class _KeywordOnly(Exception):
    """An error that pickles but cannot be rebuilt from its pickle (``code`` is lost)."""

    def __init__(self, message: str, *, code: int) -> None:
        super().__init__(message)
        self.code = code


def test_a_host_error_that_cannot_be_rebuilt_reaches_the_coordinator_by_name() -> None:
    """It pickled, so it went as itself, and the coordinator's unpickling raised a
    TypeError in its place: the run's error hid the host's."""
    from corral import CorralError
    from corral.executor._host import _portable

    sent = _portable(_KeywordOnly("disk full", code=28))
    assert isinstance(sent, CorralError) and "disk full" in str(sent)
    kept = _portable(ValueError("plain"))
    assert type(kept) is ValueError
