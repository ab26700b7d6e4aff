"""`corral.sandbox`: real hostile programs, each contained and reported with its reason.

Each program is a Python script run by this interpreter inside bubblewrap. After
each, nothing it started is left running (no process of a sandbox uid, no child
of ours) and nothing it tried to write outside its folder exists.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import anyio
import pytest

import corral
from corral import ConfigError, SandboxResult, sandbox
from corral._concurrency import SUBPROCESSES, ConcurrencyScopes
from corral._sandbox_setup import FIRST_UID, UIDS

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="needs bubblewrap"),
]

PYTHON = sys.executable
#: Wall-clock room for a program that should end on its own well before it (the
#: machine may be busy running other tests at once).
ROOMY = 60.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the sandbox's own logic is backend-neutral; trio below


def _status_field(pid: int, name: str) -> str | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = status.split(f"\n{name}:", 1)
    return found[1].split()[0] if len(found) == 2 else None


def _left_or_ours(pid: int) -> bool:
    """Whether ``pid`` descends from this process, or was left to init: not a sandbox
    another test worker is running right now."""
    me, first = os.getpid(), True
    while pid != me:
        parent = _status_field(pid, "PPid")
        if parent is None or parent == "0":
            return False  # ended meanwhile
        pid = int(parent)
        if pid == 1:
            return first  # its own parent is init: left behind
        first = False
    return True


def _sandboxed(pid: int) -> bool:
    uid = _status_field(pid, "Uid")
    return uid is not None and FIRST_UID <= int(uid) < FIRST_UID + UIDS


def sandbox_processes() -> set[int]:
    """Processes running under a uid the sandbox gives its commands (as root), of this
    test's sandboxes or left behind: another worker's sandboxes running at the same time
    (the suite runs on two) are not this test's leftovers."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _sandboxed(int(entry.name)) and _left_or_ours(int(entry.name)):
            found.add(int(entry.name))
    return found


def own_children() -> set[int]:
    me, found = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        if entry.name.isdigit() and int(fields[1]) == me:
            found.add(int(entry.name))
    return found


@pytest.fixture(autouse=True)
def machine_unharmed() -> Iterator[None]:
    children = own_children()
    yield
    assert own_children() <= children
    assert sandbox_processes() == set()


async def run_script(code: str, **limits: object) -> SandboxResult:
    limits.setdefault("timeout", ROOMY)
    return await sandbox([PYTHON, "main.py"], files={"main.py": code}, **limits)  # type: ignore[arg-type]


async def test_a_program_gets_its_files_output_and_status() -> None:
    result = await sandbox(
        [PYTHON, "main.py"],
        timeout=ROOMY,
        files={
            "main.py": "import os, sys\n"
            "print(os.getcwd(), sorted(os.listdir('.')), open('data/in.bin', 'rb').read())\n"
            "print(sys.stdin.read())\n"
            "sys.exit(3)\n",
            "data/in.bin": b"\x00\xff",
        },
        input="from stdin",
    )
    assert isinstance(result, corral.SubprocessResult)
    assert result.stdout.splitlines() == [
        "/sandbox ['data', 'main.py'] b'\\x00\\xff'",
        "from stdin",
    ]
    assert (result.returncode, result.reason, result.truncated) == (3, None, False)
    assert not result.success
    assert result.describe == "exited with status 3"


async def test_the_work_folder_is_private_and_gone_afterwards() -> None:
    first = await run_script("import os\nopen('left.txt', 'w')\nprint(sorted(os.listdir('.')))")
    assert first.stdout.strip() == "['left.txt', 'main.py']"
    second = await run_script("import os; print(sorted(os.listdir('.')))")
    assert second.stdout.strip() == "['main.py']"
    assert not await anyio.Path("/sandbox").exists()  # the folder was never the host's


async def test_no_network_not_even_loopback() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.setblocking(False)
        port = listener.getsockname()[1]
        result = await run_script(
            "import socket\n"
            f"socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
            "print('connected')\n"
        )
        assert result.returncode == 1 and "connected" not in result.stdout
        assert "ConnectionRefusedError" in result.stderr or "unreachable" in result.stderr
        with pytest.raises(BlockingIOError):
            listener.accept()  # nothing ever connected
        # The same program with network=True does connect: the test can see a connection.
        allowed = await run_script(
            f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=5)\n",
            network=True,
        )
        assert allowed.success, allowed.stderr
        connection, _ = listener.accept()
        connection.close()


async def test_writes_outside_its_folder_fail_and_leave_nothing(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("the user's")
    targets = ["/etc/corral-hostile", "/usr/corral-hostile", str(tmp_path / "planted"), "/x"]
    result = await run_script(
        "import sys\n"
        f"for path in {targets!r}:\n"
        "    try:\n"
        "        open(path, 'w').write('pwned')\n"
        "        print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', path, type(exc).__name__)\n"
        "try:\n"
        f"    print('read', open({str(secret)!r}).read())\n"
        "except OSError as exc:\n"
        "    print('unseen', type(exc).__name__)\n"
    )
    assert result.success, result.stderr
    assert "wrote" not in result.stdout and "read" not in result.stdout
    assert result.stdout.count("refused") == len(targets)
    assert "unseen FileNotFoundError" in result.stdout
    for path in targets:
        assert not await anyio.Path(path).exists()


async def test_a_fork_bomb_meets_the_process_limit() -> None:
    result = await run_script("import os\nwhile True:\n    os.fork()\n", processes=16)
    assert result.reason == "processes", result.stderr[-500:]
    assert "process limit" in result.describe


async def test_ten_gigabytes_is_refused() -> None:
    result = await run_script("block = bytearray(10 * 1024**3)\nprint('allocated')\n")
    assert result.reason == "memory"
    assert "allocated" not in result.stdout and "MemoryError" in result.stderr


async def test_a_program_that_sleeps_forever_is_killed_at_the_timeout() -> None:
    result = await run_script(
        "import os, time\nos.fork()\nprint('sleeping', flush=True)\ntime.sleep(10**6)\n",
        timeout=1.0,
    )
    assert result.reason == "timeout" and result.returncode < 0
    assert result.stdout.count("sleeping") == 2  # the output up to the kill is kept


async def test_a_gigabyte_of_output_is_cut_at_the_limit() -> None:
    result = await run_script(
        "import sys\nchunk = b'x' * (1 << 20)\n"
        "for _ in range(1024):\n    sys.stdout.buffer.write(chunk)\n",
        max_output=64 * 1024,
    )
    assert (result.reason, result.truncated) == ("output", True)
    assert len(result.stdout_bytes) == 64 * 1024


@pytest.mark.slow  # a second of CPU, and more on a busy machine
async def test_cpu_seconds_are_limited() -> None:
    result = await run_script("while True:\n    pass\n", cpu_seconds=1)
    assert (result.reason, result.returncode) == ("cpu_seconds", -24)


async def test_file_size_and_disk_are_limited() -> None:
    big = await run_script("open('big', 'wb').write(b'x' * (2 << 20))\n", file_size=1 << 20)
    assert big.reason == "file_size"
    full = await run_script(
        "i = 0\nwhile True:\n    open(f'f{i}', 'wb').write(b'x' * (256 << 10))\n    i += 1\n",
        disk=2 << 20,
    )
    assert full.reason == "disk"


async def test_read_only_folders_are_readable_and_only_that(tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("shared")
    await anyio.Path(tmp_path).chmod(0o755)  # the command runs as a user of its own: the modes hold
    code = (
        f"print(open({str(tmp_path / 'data.txt')!r}).read())\n"
        f"open({str(tmp_path / 'new.txt')!r}, 'w')\n"
    )
    result = await run_script(code, read_only=[tmp_path])
    assert result.stdout == "shared\n" and "Read-only file system" in result.stderr
    assert not await anyio.Path(tmp_path / "new.txt").exists()


async def test_hidden_paths_are_empty_inside(tmp_path: Path) -> None:
    """What the command must not read of the folders it sees (a benchmark's answers
    shipped beside its package): a file cannot be opened, a folder holds nothing."""
    (tmp_path / "answers").mkdir()
    (tmp_path / "answers" / "key.txt").write_text("42")
    (tmp_path / "solution.txt").write_text("secret")
    (tmp_path / "open.txt").write_text("public")
    await anyio.Path(tmp_path).chmod(0o755)
    code = (
        "import os\n"
        f"try:\n    open({str(tmp_path / 'solution.txt')!r}).read()\n"
        "except PermissionError:\n    print('refused')\n"
        f"print(os.listdir({str(tmp_path / 'answers')!r}))\n"
        f"print(open({str(tmp_path / 'open.txt')!r}).read())\n"
    )
    hidden = [tmp_path / "answers", tmp_path / "solution.txt"]
    result = await run_script(code, read_only=[tmp_path], hidden=hidden)
    assert result.stdout == "refused\n[]\npublic\n", result.stderr
    with pytest.raises(ConfigError, match=r"hidden: 'nowhere' is not an existing absolute path"):
        await sandbox(["true"], timeout=1, hidden=["nowhere"])
    with pytest.raises(ConfigError, match=r"hidden paths need isolation='bubblewrap'"):
        await sandbox(["true"], timeout=1, hidden=[tmp_path], isolation="none")


async def test_a_cancelled_sandbox_leaves_nothing_running() -> None:
    with anyio.move_on_after(1.0):
        await run_script("import os, time\nos.fork()\ntime.sleep(10**6)\n")
    # the fixture checks that no process of the sandbox is left


def test_a_sandbox_ends_with_the_process_that_started_it() -> None:
    """Its runner killed outright (SIGKILL: no cancellation, no cleanup), the sandbox ends
    too: its pid 1 dropped root for a uid of its own, which clears a parent-death signal."""
    runner = (
        "import sys, anyio, corral\n"
        "anyio.run(lambda: corral.sandbox([sys.executable, 'main.py'], timeout=3600, "
        "network=True, files={'main.py': sys.argv[1]}))\n"
    )
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(ROOMY)
        port = listener.getsockname()[1]
        code = (
            "import socket, time\n"
            f"held = socket.create_connection(('127.0.0.1', {port}))\n"
            "time.sleep(300)  # if left behind, not for long\n"
        )
        source = str(Path(corral.__file__).parent.parent)
        started = subprocess.Popen(
            [PYTHON, "-c", runner, code], env={**os.environ, "PYTHONPATH": source}
        )
        try:
            connection, _ = listener.accept()  # the command runs
            started.kill()
            started.wait()
            connection.settimeout(ROOMY)
            with connection:
                assert connection.recv(1) == b""  # its end closed the connection
        finally:
            started.kill()
            started.wait()


async def test_its_files_are_not_inherited_by_other_programs_started_meanwhile() -> None:
    """A program this process starts while a sandbox runs (by `os.system`, or any way
    that does not close every descriptor) gets none of the sandbox's files (hidden tests)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(ROOMY)
        port = listener.getsockname()[1]
        code = (
            "import socket\n"
            f"held = socket.create_connection(('127.0.0.1', {port}))\n"
            "held.recv(1)\n"  # until the test lets it end
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(run_script, code, network=True))
            connection, _ = await anyio.to_thread.run_sync(listener.accept)  # it runs
            with connection:
                ls = ["ls", "-l", "/proc/self/fd/"]
                run = partial(subprocess.run, ls, close_fds=False, capture_output=True)
                listing = await anyio.to_thread.run_sync(run)
    assert b"corral-sandbox" not in listing.stdout, listing.stdout.decode()


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_it_shares_the_subprocess_bound(anyio_backend: str) -> None:
    scopes = ConcurrencyScopes(max_subprocesses=1)
    with scopes.active():
        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(partial(sandbox, ["true"], timeout=ROOMY))
        stats = scopes.statistics()[SUBPROCESSES]
    assert stats.peak == 1 and stats.in_use == 0


async def test_without_bubblewrap_it_names_the_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="bubblewrap"):
        await sandbox([PYTHON, "-c", "pass"], timeout=ROOMY)
    # Only when asked for: no isolation, but the limits, the folder and the timeout.
    result = await sandbox(
        [PYTHON, "main.py"],
        timeout=ROOMY,
        isolation="none",
        files={"main.py": "import os; print(os.getcwd())\nbytearray(10 * 1024**3)\n"},
    )
    assert result.reason == "memory"
    folder = result.stdout.strip()
    assert os.path.basename(folder).startswith("corral-sandbox-")
    assert not await anyio.Path(folder).exists()
    slept = await sandbox(
        [PYTHON, "-c", "import time; time.sleep(10**6)"], timeout=0.5, isolation="none"
    )
    assert slept.reason == "timeout"


async def test_without_isolation_its_temporary_files_go_with_its_folder() -> None:
    """Its TMPDIR is its own folder, deleted afterwards: a program's temporary file (not
    removed, or its program killed first) is not left in the host's /tmp."""
    code = "import tempfile\nprint(tempfile.mkstemp(prefix='corral-test-left-')[1])\n"
    result = await sandbox([PYTHON, "-c", code], timeout=ROOMY, isolation="none")
    assert result.success, result.stderr
    left = result.stdout.strip()
    assert os.path.basename(left).startswith("corral-test-left-")
    assert not await anyio.Path(left).exists(), left


@pytest.mark.parametrize(
    "keywords",
    [
        {"timeout": 0},
        {"timeout": float("inf")},
        {"timeout": 1, "memory": 0},
        {"timeout": 1, "cpu_seconds": -1},
        {"timeout": 1, "processes": True},
        {"timeout": 1, "files": {"../escape.py": ""}},
        {"timeout": 1, "files": {"/etc/passwd": ""}},
        {"timeout": 1, "files": {"a.py": 3}},
        {"timeout": 1, "isolation": "docker"},
        {"timeout": 1, "read_only": ["/no/such/folder"]},
        {"timeout": 1, "read_only": ["relative"]},
        {"timeout": 1, "env": {"A": 1}},
        {"timeout": 1, "env": {"A=B": "c"}},
    ],
)
async def test_bad_arguments_are_refused(keywords: dict[str, object]) -> None:
    with pytest.raises(ConfigError):
        await sandbox(["true"], **keywords)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("command", "keywords", "named"),
    [
        # Written by the sandbox's own program, which failed as if the command had.
        (["true"], {"files": {"a": "", "a/b.py": ""}}, "'a/b.py'"),
        (["true"], {"files": {"a/b.py": "", "a": ""}}, "'a'"),
        (["true"], {"files": {"a\0b": ""}}, "'a\\x00b'"),
        # Text that is no UTF-8 (a UnicodeEncodeError).
        (["true"], {"files": {"a.py": "x = '\ud83d'"}}, "files['a.py']"),
        # Two names of one file: one content would be lost.
        (["true"], {"files": {"a.py": "1", "./a.py": "2"}}, "'./a.py'"),
        # A ValueError from deep in the process's start.
        (["echo", "a\0b"], {}, "'a\\x00b'"),
        ("echo a\0b", {}, "'echo a\\x00b'"),
        (["true"], {"env": {"A": "b\0c"}}, "'b\\x00c'"),
    ],
    ids=[
        "file_in_a_file",
        "file_over_a_folder",
        "nul_in_name",
        "no_utf_8",
        "one_file_twice",
        "nul_in_argument",
        "nul_in_line",
        "nul_in_env",
    ],
)
async def test_files_and_text_it_cannot_write_or_pass_are_refused(
    command: object, keywords: dict[str, object], named: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(named)):
        await sandbox(command, timeout=ROOMY, **keywords)  # type: ignore[arg-type]


async def test_an_exit_status_above_128_is_the_commands_own() -> None:
    """A command's exit(130) is an exit, not a death by SIGINT; a real signal still is."""
    exited = await run_script("import sys\nsys.exit(130)\n")
    assert (exited.returncode, exited.reason) == (130, None)
    assert exited.describe == "exited with status 130"
    killed = await run_script("import os, signal\nos.kill(os.getpid(), signal.SIGTERM)\n")
    assert (killed.returncode, killed.reason) == (-15, "signal")


async def test_a_program_cannot_pass_itself_off_as_bubblewrap_failing() -> None:
    """Output that looks like bubblewrap's own error is the command's failure, not an
    error of Corral's (which would make a scorer crash instead of fail)."""
    result = await run_script("import sys\nsys.stderr.write('bwrap: no\\n')\nsys.exit(1)\n")
    assert (result.returncode, result.reason) == (1, None)
    assert result.stderr == "bwrap: no\n"


NOBODY = 65534
#: Run by an unprivileged user: a sandbox filling every writable folder it sees.
FILLER = r"""
import sys, anyio
from corral import sandbox
CODE = '''
import os
for folder in ("/", "/dev", "/dev/shm", "/sandbox", "/tmp"):
    try:
        with open(os.path.join(folder, "filler"), "wb") as out:
            out.write(b"x" * (2 << 20))
        print("wrote", folder)
    except OSError as exc:
        print("refused", folder, exc.errno)
'''
async def main():
    result = await sandbox(
        [sys.executable, "main.py"], files={"main.py": CODE}, timeout=60, disk=1 << 20
    )
    print(result.stdout, end="")
    sys.stderr.write(result.stderr)
anyio.run(main)
"""


def unprivileged_python() -> tuple[str, dict[str, str]]:
    """An interpreter an unprivileged user can run, and the environment that lets it
    import Corral and its dependencies (this test runs as root)."""
    import subprocess

    if os.geteuid() != 0 or not Path("/usr/bin/setpriv").exists():
        pytest.skip("needs root, to become an unprivileged user")
    site = str(Path(anyio.__file__).parent.parent)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/",
        "PYTHONPATH": f"{Path(corral.__file__).parent.parent}:{site}",
    }
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    # Under /usr: the sandbox shows it (a Python under a private home would not be).
    for candidate in {os.path.realpath(PYTHON), f"/usr/bin/{version}"}:
        if not candidate.startswith("/usr/"):
            continue
        probe = subprocess.run(
            [
                "/usr/bin/setpriv",
                f"--reuid={NOBODY}",
                f"--regid={NOBODY}",
                "--clear-groups",
                candidate,
                "-c",
                "import corral, anyio",
            ],
            env=env,
            capture_output=True,
            check=False,
            cwd="/",
        )
        if probe.returncode == 0:
            return candidate, env
    pytest.skip("no Python here that an unprivileged user can run with Corral")


def run_as_nobody(code: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` as an unprivileged user (`unprivileged_python`), its output
    as text (skipped where no such user can run Corral)."""
    python, env = unprivileged_python()
    who = [f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    return subprocess.run(
        ["/usr/bin/setpriv", *who, python, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        cwd="/",
    )


def test_an_unprivileged_users_sandbox_holds_no_more_than_its_disk() -> None:
    """Without root the sandbox runs in a user namespace, where bubblewrap's own root
    and /dev (memory, with no bound of their own) belong to the command: writing there
    would fill the host's memory past ``disk``. Only /sandbox and /tmp are writable."""
    ran = run_as_nobody(FILLER)
    assert ran.returncode == 0, ran.stderr
    assert "wrote" not in ran.stdout, ran.stdout
    assert ran.stdout.count("refused") == 5, ran.stdout + ran.stderr
