"""A sandboxed command makes no user namespace of its own: in one it could mount a tmpfs
of its own (half the host's memory, past ``disk``), as root (its own uid) and not."""

from __future__ import annotations

import pytest

from tests.system.test_sandbox import run_as_nobody, run_script

pytestmark = [pytest.mark.anyio]

#: unshare(2) and clone(2) (as a fork) asking for a new user namespace, and unshare(1)
#: mounting a tmpfs over /tmp in one.
NEW_USERNS = """
import ctypes, os, platform, subprocess
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, SIGCHLD = 0x10000000, 17
clone = {"x86_64": 56, "aarch64": 220}.get(platform.machine())
if clone is not None:
    pid = libc.syscall(clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0)
    if pid == 0:
        os._exit(0)
    if pid > 0:
        os.waitpid(pid, 0)
    print("clone", min(pid, 1) if pid > 0 else pid)
ran = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs none /tmp"])
print("mount", "refused" if ran.returncode else "mounted")
print("unshare", libc.unshare(CLONE_NEWUSER), ctypes.get_errno())
"""
REFUSED = "clone -1\nmount refused\nunshare -1 1\n"

AS_USER = f"""
import sys, anyio
from corral import sandbox
async def main():
    r = await sandbox([sys.executable, "main.py"], files={{"main.py": {NEW_USERNS!r}}}, timeout=60)
    print(r.returncode, r.stdout, end="")
anyio.run(main)
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_command_makes_no_user_namespace() -> None:
    result = await run_script(NEW_USERNS)
    assert (result.returncode, result.stdout) == (0, REFUSED), result.stderr


def test_an_unprivileged_users_command_makes_no_user_namespace() -> None:
    ran = run_as_nobody(AS_USER)
    assert ran.stdout == f"0 {REFUSED}", ran.stdout + ran.stderr
