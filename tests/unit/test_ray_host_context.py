"""A Ray host's jobs run in a context like an ``anyio.run``'s (Ray's event loop gives none)."""

from __future__ import annotations

import asyncio

import sniffio
from anyio._backends._asyncio import find_root_task

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
