"""`corral.sandbox(isolation="none")` deletes its temporary folder afterwards, whatever
modes the command left on the folders in it (run by an unprivileged user: root could
delete them anyway)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.system.test_sandbox import run_as_nobody

#: Folders the command made unwritable, unreadable, and its own folder unwritable.
LOCKED = """
import os
os.makedirs("kept/deeper")
open("kept/deeper/file", "w").close()
os.chmod("kept/deeper", 0o500)
os.makedirs("hidden")
open("hidden/file", "w").close()
os.chmod("hidden", 0)
os.chmod(".", 0o500)
"""

AS_USER = f"""
import sys, anyio
from corral import sandbox
async def main():
    code = {LOCKED!r} + "print(os.getcwd())"
    r = await sandbox([sys.executable, "-c", code], timeout=60, isolation="none")
    print(r.returncode, r.stdout, r.stderr, end="")
anyio.run(main)
"""


def test_its_folder_is_deleted_whatever_the_command_left_in_it() -> None:
    ran = run_as_nobody(AS_USER)
    status, _, folder = ran.stdout.strip().partition(" ")
    assert status == "0" and "corral-sandbox-" in folder, ran.stdout + ran.stderr
    left = Path(folder).exists()
    shutil.rmtree(folder, ignore_errors=True)  # as root
    assert not left, f"{folder} was left behind"
