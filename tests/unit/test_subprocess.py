"""`corral.subprocess`: output and status, the run's bound, and nothing left behind on timeout."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable
from pathlib import Path
from subprocess import CalledProcessError

import anyio
import pytest

from corral import ConfigError
from corral._concurrency import (
    SUBPROCESSES,
    ConcurrencyScopes,
    available_cpus,
    cgroup_cpu_quota,
)
from corral._subprocess import SubprocessResult, subprocess
from corral.testing import ConcurrencyGauge
from corral.testing import wait_all_tasks_blocked as all_blocked

pytestmark = pytest.mark.anyio


def stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None once it is gone (reaped)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text.rpartition(")")[2].split()
    return fields[0], int(fields[1])


def children() -> set[int]:
    """Every process whose parent is this one, zombies included."""
    me, found = os.getpid(), set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (s := stat(int(entry.name))) is not None and s[1] == me:
            found.add(int(entry.name))
    return found


@pytest.fixture
def new_children() -> Callable[[], set[int]]:
    """Children of this process started since the test began, whatever earlier tests left."""
    before = children()
    return lambda: children() - before


async def exited(pidfd: int) -> None:
    """Wait until the process behind ``pidfd`` has exited (a pidfd is readable from then on)."""
    try:
        with anyio.fail_after(10):  # a safety net for a broken kill, not a wait for settling
            await anyio.wait_readable(pidfd)
    finally:
        os.close(pidfd)


async def assert_killed(pid: int, pidfd: int) -> None:
    """The process has exited, and if its zombie remains, it is not ours to reap.

    An orphaned grandchild is reaped by init; an init that never reaps (as in
    some containers) keeps its zombie, which is no longer this process's business.
    """
    await exited(pidfd)
    s = stat(pid)
    assert s is None or (s[0] in "ZX" and s[1] != os.getpid()), s


class Lines:
    """Lines from a FIFO the test holds open for reading and writing, read without blocking."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        # O_RDWR: opening never blocks, and writers coming and going never make us see EOF.
        self.fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
        self._buffer = b""

    async def next(self) -> str:
        while b"\n" not in self._buffer:
            await anyio.wait_readable(self.fd)
            try:
                self._buffer += os.read(self.fd, 4096)
            except BlockingIOError:
                pass
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def write(self, data: bytes) -> None:
        os.write(self.fd, data)

    def close(self) -> None:
        os.close(self.fd)


async def test_output_status_and_success() -> None:
    result = await subprocess(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (result.returncode, result.stdout, result.stderr) == (3, "out\n", "err\n")
    assert (result.stdout_bytes, result.success) == (b"out\n", False)
    assert result.args == ("sh", "-c", "echo out; echo err >&2; exit 3")
    assert (await subprocess(["true"])).success
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.returncode = 0  # type: ignore[misc]


async def test_undecodable_output_is_replaced_in_the_text_but_kept_in_the_bytes() -> None:
    result = await subprocess(["printf", r"a\377b"])
    assert (result.stdout, result.stdout_bytes) == ("a\ufffdb", b"a\xffb")


async def test_check_raises_called_process_error_with_the_output() -> None:
    with pytest.raises(CalledProcessError) as caught:
        await subprocess(["sh", "-c", "echo no; exit 2"], check=True)
    assert (caught.value.returncode, caught.value.stdout) == (2, b"no\n")
    assert (await subprocess(["true"], check=True)).returncode == 0


async def test_a_string_runs_in_the_shell() -> None:
    assert (await subprocess("echo $((1 + 2))")).stdout == "3\n"


async def test_input_as_text_or_bytes_and_an_empty_stdin_otherwise() -> None:
    assert (await subprocess(["cat"], input="héllo")).stdout == "héllo"
    assert (await subprocess(["cat"], input=b"\x00\x01")).stdout_bytes == b"\x00\x01"
    assert (await subprocess(["cat"])).stdout == ""  # reads EOF, not the test's terminal


async def test_large_input_and_output_do_not_deadlock() -> None:
    data = os.urandom(4 << 20)
    result = await subprocess(["sh", "-c", "cat; cat /dev/null >&2"], input=data)
    assert result.stdout_bytes == data


async def test_input_the_command_never_reads_is_not_an_error() -> None:
    assert (await subprocess(["true"], input=b"x" * (4 << 20))).success


async def test_cwd_and_env_added_to_this_process_environment(tmp_path: Path) -> None:
    result = await subprocess(
        ["sh", "-c", 'pwd; echo "$CORRAL_TEST_VAR"; command -v sh >/dev/null && echo path kept'],
        cwd=tmp_path,
        env={"CORRAL_TEST_VAR": "set"},
    )
    assert result.stdout.splitlines() == [str(tmp_path), "set", "path kept"]


async def test_a_missing_program_raises_and_frees_its_slot() -> None:
    scopes = ConcurrencyScopes(max_subprocesses=1)
    with scopes.active():
        with pytest.raises(FileNotFoundError):
            await subprocess(["/nonexistent/corral-test-program"])
        assert scopes.statistics()[SUBPROCESSES].in_use == 0
        assert (await subprocess(["true"])).success  # the only slot is free again


@pytest.mark.parametrize(
    ("args", "deadline"),
    [
        ([], None),
        ("  ", None),
        (b"true", None),
        (["true"], 0),
        (["true"], -1.0),
        (["true"], float("inf")),
        (["true"], True),
        (["true"], "1"),
    ],
)
async def test_bad_arguments_are_refused(args: object, deadline: object) -> None:
    with pytest.raises(ConfigError):
        await subprocess(args, timeout=deadline)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "keywords"),
    [(["echo", "a\0b"], {}), ("echo a\0b", {}), (["true"], {"env": {"A": "a\0b"}})],
    ids=["argument", "line", "env"],
)
async def test_a_nul_character_is_refused_naming_the_text(
    args: object, keywords: dict[str, object]
) -> None:
    """A NUL cannot be passed to a program: a ValueError from deep in the start, before."""
    with pytest.raises(ConfigError, match=re.escape("a\\x00b")):
        await subprocess(args, **keywords)  # type: ignore[arg-type]


@pytest.mark.parametrize("given", [3, ["text"]], ids=["int", "list"])
async def test_input_that_is_neither_text_nor_bytes_is_refused_before_the_command_starts(
    tmp_path: Path, given: object
) -> None:
    """It reached the process's standard input: the command ran, then a TypeError in an
    ExceptionGroup came out of the task group feeding it, not a `ConfigError`."""
    ran = tmp_path / "ran"
    named = re.escape(f"input must be text, bytes or None, not {given!r}")
    with pytest.raises(ConfigError, match=named):
        await subprocess(["touch", str(ran)], input=given)  # type: ignore[arg-type]
    assert not ran.exists()


@pytest.mark.parametrize("given", [bytearray(b"hi"), memoryview(b"hi")], ids=["bytearray", "view"])
async def test_input_of_bytes_of_another_type_reaches_the_command(given: object) -> None:
    """A bytearray or memoryview (bytes-like, as `subprocess.run` takes) ran as input
    until the input check refused all but bytes and text."""
    result = await subprocess(["cat"], input=given)  # type: ignore[arg-type]
    assert result.stdout == "hi"


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"env": {"A": 1}}, "env must map names to text, not 'A': 1"),
        ({"env": {1: "a"}}, "env must map names to text, not 1: 'a'"),
        ({"env": {"": "a"}}, "env must map names to text, not '': 'a'"),
        ({"check": "no"}, "check must be True or False, not 'no'"),
        ({"env": "A=1"}, "env must be a mapping of names to text or None, not 'A=1'"),
        ({"env": 3}, "env must be a mapping of names to text or None, not 3"),
    ],
    ids=["value", "name", "empty-name", "check", "env-text", "env-number"],
)
async def test_env_and_check_of_the_wrong_type_are_refused_before_the_command_starts(
    tmp_path: Path, keywords: dict[str, object], named: str
) -> None:
    """As `corral.sandbox` refuses them: an env value that is no text was a TypeError
    from the process's start, and ``check="no"`` was read by its truth."""
    ran = tmp_path / "ran"
    with pytest.raises(ConfigError, match=re.escape(named)):
        await subprocess(["touch", str(ran)], **keywords)  # type: ignore[arg-type]
    assert not ran.exists()


async def test_a_timeout_kills_and_reaps_the_whole_process_tree(
    tmp_path: Path, new_children: Callable[[], set[int]]
) -> None:
    pids = tmp_path / "pids"
    script = f"sleep 1000 & echo $$ $! > {pids}; wait"
    with pytest.raises(TimeoutError, match=r"did not finish within 0\.5 s"):
        await subprocess(["sh", "-c", script], timeout=0.5)
    child, grandchild = map(int, pids.read_text().split())
    assert stat(child) is None  # killed and reaped before TimeoutError was raised
    try:
        pidfd = os.pidfd_open(grandchild)
    except ProcessLookupError:
        pass  # already killed and reaped by init
    else:
        await assert_killed(grandchild, pidfd)
    assert not new_children()  # no zombie of ours either


async def test_cancellation_kills_and_reaps_the_whole_process_tree(
    tmp_path: Path, new_children: Callable[[], set[int]]
) -> None:
    started = Lines(tmp_path / "started")
    script = f"sleep 1000 & echo $$ $! > {tmp_path / 'started'}; wait"
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(subprocess, ["sh", "-c", script])
            child, grandchild = map(int, (await started.next()).split())
            # Both are alive until we cancel, so these pidfds are surely theirs.
            pidfds = [os.pidfd_open(child), os.pidfd_open(grandchild)]
            tg.cancel_scope.cancel()
    finally:
        started.close()
    assert stat(child) is None  # reaped before the cancellation finished propagating
    await exited(pidfds[0])
    await assert_killed(grandchild, pidfds[1])
    assert not new_children()


async def test_at_most_max_subprocesses_run_at_once(
    tmp_path: Path, new_children: Callable[[], set[int]]
) -> None:
    calls, limit = 5, 2
    started, gate = Lines(tmp_path / "started"), Lines(tmp_path / "gate")
    # Each command says it started, then blocks until the test writes it one line.
    script = f"echo $$ >> {tmp_path / 'started'}; echo $$; read _ < {tmp_path / 'gate'}"
    gauge = ConcurrencyGauge({"subprocess": limit})
    send, finished = anyio.create_memory_object_stream[int](calls)
    scopes = ConcurrencyScopes(max_subprocesses=limit)

    async def call() -> None:
        result = await subprocess(["sh", "-c", script])
        await send.send(int(result.stdout))

    running: set[int] = set()
    try:
        with scopes.active():
            async with anyio.create_task_group() as tg:
                for _ in range(calls):
                    tg.start_soon(call)
                for done in range(calls):
                    while len(running) < min(limit, calls - done):
                        running.add(int(await started.next()))
                        gauge.enter("subprocess")
                    await all_blocked()
                    assert new_children() == running  # no other command was started
                    stats = scopes.statistics()[SUBPROCESSES]
                    assert (stats.in_use, stats.waiting) == (
                        len(running),
                        calls - done - len(running),
                    )
                    gate.write(b"\n")  # releases one of them, whichever reads first
                    pid = await finished.receive()
                    running.remove(pid)
                    gauge.exit("subprocess")
                    assert stat(pid) is None  # reaped before its slot went to the next
    finally:
        started.close()
        gate.close()
    gauge.assert_ok()
    assert gauge.peak("subprocess") == limit and gauge.entries["subprocess"] == calls
    assert scopes.statistics()[SUBPROCESSES].peak == limit


async def test_outside_a_run_calls_share_the_event_loop_registry() -> None:
    await subprocess(["true"])
    stats = ConcurrencyScopes.current().statistics()[SUBPROCESSES]
    assert (stats.limit, stats.in_use) == (available_cpus(), 0)


def test_the_default_bound_is_the_cpus_this_process_may_use() -> None:
    assert ConcurrencyScopes().max_subprocesses == available_cpus() >= 1
    assert available_cpus() <= len(os.sched_getaffinity(0))


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_cgroup_v2_quota_caps_the_cpus(tmp_path: Path) -> None:
    nowhere = tmp_path / "no-membership"
    assert cgroup_cpu_quota(tmp_path, nowhere) is None
    write(tmp_path, "cpu.max", "max 100000\n")
    assert cgroup_cpu_quota(tmp_path, nowhere) is None
    write(tmp_path, "cpu.max", "50000 100000\n")
    assert cgroup_cpu_quota(tmp_path, nowhere) == 0.5
    assert available_cpus(tmp_path) == 1  # half a CPU still gets one


def test_a_quota_on_any_ancestor_cgroup_applies(tmp_path: Path) -> None:
    root, membership = tmp_path / "cgroup", tmp_path / "membership"
    write(tmp_path, "membership", "0::/outer/inner\n")
    write(root, "cpu.max", "max 100000\n")
    write(root, "outer/cpu.max", "150000 100000\n")
    write(root, "outer/inner/cpu.max", "400000 100000\n")
    assert cgroup_cpu_quota(root, membership) == 1.5


@pytest.mark.parametrize("mount", ["cpu", "cpu,cpuacct"])
def test_a_cgroup_v1_cfs_quota_caps_the_cpus(tmp_path: Path, mount: str) -> None:
    nowhere = tmp_path / "no-membership"
    write(tmp_path, f"{mount}/cpu.cfs_period_us", "100000\n")
    write(tmp_path, f"{mount}/cpu.cfs_quota_us", "-1\n")
    assert cgroup_cpu_quota(tmp_path, nowhere) is None
    write(tmp_path, f"{mount}/cpu.cfs_quota_us", "100000\n")
    assert cgroup_cpu_quota(tmp_path, nowhere) == 1.0
    assert available_cpus(tmp_path) == 1


def test_a_generous_quota_does_not_raise_the_affinity_count(tmp_path: Path) -> None:
    write(tmp_path, "cpu.max", "10000000 100000\n")
    assert available_cpus(tmp_path) == len(os.sched_getaffinity(0))


def test_result_repr_leaves_the_output_out() -> None:
    result = SubprocessResult(("x",), 0, b"a" * 10_000, b"")
    assert repr(result) == "SubprocessResult(args=('x',), returncode=0)"
