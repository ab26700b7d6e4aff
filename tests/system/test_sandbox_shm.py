"""Python's multiprocessing (POSIX semaphores in /dev/shm) works in the sandbox, for an
unprivileged user (as it did before / and /dev became read-only) and as root."""

from __future__ import annotations

import pytest

from tests.system.test_sandbox import run_as_nobody, run_script

pytestmark = [pytest.mark.anyio]

MP = (
    "import multiprocessing as mp\n"
    "q = mp.Queue(); q.put(7); print(q.get())\n"
    "with mp.Pool(2) as pool: print(pool.map(abs, [-1, -2]))\n"
)

AS_USER = f"""
import sys, anyio
from corral import sandbox
async def main():
    r = await sandbox([sys.executable, "main.py"], files={{"main.py": {MP!r}}}, timeout=60)
    print(r.returncode, r.stdout, r.stderr[-300:])
anyio.run(main)
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_multiprocessing_works_in_the_sandbox() -> None:
    result = await run_script(MP)
    assert (result.returncode, result.stdout) == (0, "7\n[1, 2]\n"), result.stderr


def test_multiprocessing_works_in_an_unprivileged_users_sandbox() -> None:
    ran = run_as_nobody(AS_USER)
    assert ran.stdout.startswith("0 7\n[1, 2]\n"), ran.stdout + ran.stderr
