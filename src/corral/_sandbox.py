"""`corral.sandbox`: run untrusted (model-written) code under bubblewrap, bounded."""

from __future__ import annotations

import math
import os
import random
import resource
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Final, Literal

import anyio
import anyio.lowlevel
from anyio.abc import Process

from ._checks import flag, positive_int, seconds
from ._errors import ConfigError, CorralError
from ._sandbox_seccomp import no_user_namespaces
from ._sandbox_setup import (
    FIRST_UID,
    UIDS,
    WORKDIR,
    Limits,
    bwrap_command,
    encode_files,
    interpreter_folders,
    wrapper_command,
)
from ._subprocess import (
    Command,
    Ended,
    SubprocessResult,
    _command,
    checked_env,
    kill_group,
    run_bounded,
    stdin_bytes,
)

Isolation = Literal["bubblewrap", "none"]

#: Why a sandboxed command was stopped or failed, as `SandboxResult.reason` names it.
REASONS: Final = {
    "timeout": "ran past its wall-clock timeout (its processes were killed)",
    "output": "wrote more output than allowed (its processes were killed)",
    "cpu_seconds": "used up its CPU seconds",
    "memory": "ran out of memory",
    "processes": "could not start another process (the process limit)",
    "file_size": "wrote a file larger than allowed",
    "disk": "filled its work folder",
    "signal": "was killed by a signal",
}

MIB = 1024 * 1024
#: The defaults of the largest file a sandboxed command may write, and of its work folder.
FILE_SIZE = DISK = 64 * MIB
#: The largest memory, file size, process count or disk taken (below a C long).
_MAX_LIMIT = 2**62
#: CPU seconds beyond which the command's CPU is in effect not bounded (136 years).
_MAX_CPU = 2**32

#: The setting behind each resource limit the wrapper sets.
_SETTINGS = {
    "RLIMIT_CPU": "cpu_seconds",
    "RLIMIT_AS": "memory",
    "RLIMIT_FSIZE": "file_size",
    "RLIMIT_NPROC": "processes",
}


def _check_host_limits(limits: Limits, isolated: bool, cpu_name: str) -> None:
    """A limit above this process's own hard limit cannot be set in the sandbox (the
    wrapper would fail, as if the command had): a `ConfigError` naming it, first."""
    for rlimit, _, hard in limits.rlimits(isolated):
        setting = _SETTINGS.get(rlimit)
        if setting is None:
            continue
        host = resource.getrlimit(getattr(resource, rlimit))[1]
        if host != resource.RLIM_INFINITY and hard > host:
            name = cpu_name if setting == "cpu_seconds" else setting
            raise ConfigError(
                f"{name} {getattr(limits, setting)!r} is above this system's hard limit "
                f"({rlimit} {host}); give at most that"
            )


@dataclass(frozen=True, slots=True)
class SandboxResult(SubprocessResult):
    """How a sandboxed command ended: `corral.SubprocessResult` plus why it stopped.

    ``reason`` is None when the command exited on its own (with any status),
    else one of ``timeout``, ``output``, ``cpu_seconds``, ``memory``,
    ``processes``, ``file_size``, ``disk`` or ``signal``; ``describe`` says it
    in words. ``memory``, ``processes`` and ``disk`` are read from the error
    output of a command that failed (``MemoryError``, ``Resource temporarily
    unavailable``, ``No space left on device``). ``truncated``: a stream was cut
    at ``max_output`` bytes.
    """

    reason: str | None = None
    truncated: bool = False

    @property
    def describe(self) -> str:
        """The reason in words, or how the command exited."""
        if self.reason is not None:
            return REASONS[self.reason]
        return f"exited with status {self.returncode}"


async def sandbox(
    command: Command,
    *,
    # The command's own deadline (a result, not an exception): the wait for a slot is not counted.
    timeout: float,  # noqa: ASYNC109
    memory: int | None = 1024 * MIB,
    cpu_seconds: float | None = None,
    processes: int | None = 64,
    file_size: int | None = FILE_SIZE,
    disk: int = DISK,
    max_output: int = 1 * MIB,
    network: bool = False,
    files: Mapping[str, str | bytes] | None = None,
    env: Mapping[str, str] | None = None,
    input: bytes | str | None = None,
    read_only: Sequence[str | os.PathLike[str]] = (),
    isolation: Isolation = "bubblewrap",
    hidden: Sequence[str | os.PathLike[str]] = (),
) -> SandboxResult:
    """Run ``command`` (a program and its arguments, or a shell line) isolated and bounded.

    Under bubblewrap (Debian's ``bubblewrap``) the command sees the system
    (``/usr``, ``/etc``, ...) and this Python's folders read-only, nothing of the
    user's files, no network unless ``network=True`` (a new network namespace:
    not even 127.0.0.1), and a private writable work folder ``/sandbox`` (its
    current directory and ``HOME``) holding ``files`` (name -> text or bytes),
    which is memory of at most ``disk`` bytes, as is its ``/tmp``, and is gone
    when the command ends. ``read_only`` adds host folders it may read; ``hidden``
    names files and folders among those it sees that it must not read (a benchmark's
    answers shipped beside its package): a file there cannot be opened, a folder is empty.

    Limits per process: ``memory`` bytes of address space, ``cpu_seconds``
    (default: ``timeout`` rounded up), ``file_size`` bytes per file written;
    ``processes`` at once for the whole sandbox. ``timeout`` (seconds, wall
    clock) kills every process of the sandbox; so does more than ``max_output``
    bytes on stdout or stderr. Neither raises: the result says why
    (`SandboxResult.reason`), with the output up to then.

    It waits for a slot of the same bound as `corral.subprocess`
    (``max_subprocesses``). Without bubblewrap it is a `ConfigError`, unless
    ``isolation="none"``: the command then runs here, in a temporary folder
    deleted afterwards, with the time, output, CPU, memory and file-size limits
    but no process limit and no isolation at all.
    """
    argv = _argv(command)
    limits = checked_limits(
        timeout=timeout,
        memory=memory,
        cpu_seconds=cpu_seconds,
        processes=processes,
        file_size=file_size,
        disk=disk,
        max_output=max_output,
        isolation=isolation,
    )
    work_files = _files(files)
    flag("network", network)  # read by its truth, "no" would open the network
    data = stdin_bytes(input)
    extra_env = checked_env(env)
    shown = _host_paths(read_only, "read_only", "a list of host folders")
    hide = hidden_paths(hidden, isolation)
    if isolation == "none":
        return await _unisolated(argv, timeout, limits, work_files, data, extra_env, max_output)
    bwrap = _bwrap()
    as_root = os.geteuid() == 0
    fd = _memfd(encode_files(work_files)) if work_files else None
    started, status = _memfd(b""), _memfd(b"")
    rules = no_user_namespaces()
    seccomp = None if rules is None else _memfd(rules)
    try:
        # As root, a uid of its own: root is never held to a process limit.
        with _own_uid() if as_root else nullcontext(None) as uid:
            inner = wrapper_command(
                argv,
                workdir=WORKDIR,
                limits=limits,
                uid=uid,
                files_fd=fd,
                isolated=True,
                started_fd=started,
                status_fd=status,
            )
            outer = bwrap_command(
                bwrap,
                inner,
                network=network,
                disk=disk,
                read_only=[*interpreter_folders(), *shown],
                hidden=hide,
                env=_environment(WORKDIR, extra_env),
                as_root=as_root,
                seccomp_fd=seccomp,
            )
            passed = (fd, started, status, seccomp)
            ended = await run_bounded(
                tuple(outer),
                data,
                timeout,
                pass_fds=tuple(each for each in passed if each is not None),
                max_output=max_output,
                kill=_kill_sandbox,
            )
        began = os.pread(started, 1, 0) == b"1"
        own = os.pread(status, 32, 0)
    finally:
        for each in (fd, started, status, seccomp):
            if each is not None:
                os.close(each)
    if not began and _bwrap_failed(ended):
        message = ended.stderr.decode("utf-8", "replace").strip()
        raise CorralError(f"bubblewrap could not start the sandbox: {message}")
    return _result(argv, ended, from_bwrap=True, status=own)


def checked_limits(
    *,
    timeout: float,  # noqa: ASYNC109
    memory: int | None,
    cpu_seconds: float | None,
    processes: int | None,
    file_size: int | None,
    disk: int,
    max_output: int,
    isolation: Isolation,
) -> Limits:
    """The limits of `sandbox`, checked (a `ConfigError` naming a bad one): so a caller
    that runs it later (a scorer) can refuse them when it is made."""
    seconds("timeout", timeout)
    for name, value in (
        ("memory", memory),
        ("processes", processes),
        ("file_size", file_size),
        ("max_output", max_output),
    ):
        positive_int(name, value, or_none=True)
    positive_int("disk", disk)  # the size of its work folder: there is no "no bound"
    for name, value in (
        ("memory", memory),
        ("processes", processes),
        ("file_size", file_size),
        ("disk", disk),
    ):
        if value is not None and value > _MAX_LIMIT:  # a C long for setrlimit or bwrap
            raise ConfigError(f"{name} must be at most {_MAX_LIMIT}, not {value!r}")
    cpu_name = "cpu_seconds"
    if cpu_seconds is None:
        cpu_seconds, cpu_name = timeout, "cpu_seconds (default: timeout)"
    seconds("cpu_seconds", cpu_seconds)
    if isolation not in ("bubblewrap", "none"):
        raise ConfigError(f"isolation must be 'bubblewrap' or 'none', not {isolation!r}")
    # More CPU than a century is no bound at all; the kernel's count would overflow.
    limits = Limits(min(math.ceil(cpu_seconds), _MAX_CPU), memory, processes, file_size)
    _check_host_limits(limits, isolation != "none", cpu_name)
    return limits


async def _unisolated(
    argv: tuple[str, ...],
    timeout: float,  # noqa: ASYNC109
    limits: Limits,
    files: Mapping[str, str | bytes],
    data: bytes | None,
    env: Mapping[str, str],
    max_output: int,
) -> SandboxResult:
    folder = await anyio.to_thread.run_sync(tempfile.mkdtemp, None, "corral-sandbox-")
    try:
        fd = _memfd(encode_files(files)) if files else None
        try:
            inner = wrapper_command(
                argv, workdir=folder, limits=limits, uid=None, files_fd=fd, isolated=False
            )
            # Its temporary files in its folder too: gone with it, none left in the host's /tmp.
            environment = _environment(
                folder, {"PATH": os.environ.get("PATH", ""), **env}, tmp=folder
            )
            ended = await run_bounded(
                tuple(inner),
                data,
                timeout,
                cwd=folder,
                env=environment,
                pass_fds=() if fd is None else (fd,),
                max_output=max_output,
            )
        finally:
            if fd is not None:
                os.close(fd)
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(_remove, folder)
    return _result(argv, ended, from_bwrap=False)


def _remove(folder: str) -> None:
    """Delete ``folder``, the folders in it the command left unwritable or unreadable
    too (made its user's again first: not being root, we could not delete them)."""
    with suppress(OSError):
        os.chmod(folder, 0o700)
    for path, folders, _ in os.walk(folder):
        for name in folders:
            inner = os.path.join(path, name)
            if not os.path.islink(inner):
                with suppress(OSError):
                    os.chmod(inner, 0o700)
    shutil.rmtree(folder, True)


def _result(
    argv: tuple[str, ...], ended: Ended, *, from_bwrap: bool, status: bytes = b""
) -> SandboxResult:
    returncode = ended.returncode
    # bubblewrap reports a command killed by signal N as status 128 + N; as
    # corral.subprocess (and Python), a negative status names the signal. The
    # wrapper's own account of the command tells that from a command's exit(128 + N),
    # when it agrees with bubblewrap's status (the command cannot change a verdict).
    own = _status(status)
    if from_bwrap and own is not None and (128 - own if own < 0 else own) == returncode:
        returncode = own
    elif from_bwrap and 128 < returncode < 128 + 65:
        returncode = 128 - returncode
    return SandboxResult(
        argv,
        returncode,
        ended.stdout,
        ended.stderr,
        reason=_reason(ended, returncode),
        truncated=ended.overflowed,
    )


def _status(text: bytes) -> int | None:
    try:
        return int(text.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        return None


def _reason(ended: Ended, returncode: int) -> str | None:
    if ended.timed_out:
        return "timeout"
    if ended.overflowed:
        return "output"
    if returncode == -signal.SIGXCPU:
        return "cpu_seconds"
    if returncode == -signal.SIGXFSZ:
        return "file_size"
    if returncode == 0:
        return None
    tail = ended.stderr[-4096:]
    for reason, marks in _MARKS:
        if any(mark in tail for mark in marks):
            return reason
    return "signal" if returncode < 0 else None


# What a failing command's last words say of a limit it met.
_MARKS: tuple[tuple[str, tuple[bytes, ...]], ...] = (
    ("memory", (b"MemoryError", b"Cannot allocate memory", b"std::bad_alloc", b"out of memory")),
    ("processes", (b"Resource temporarily unavailable",)),
    ("disk", (b"No space left on device",)),
    ("file_size", (b"File too large",)),
)


def _argv(command: Command) -> tuple[str, ...]:
    checked = _command(command)
    return ("/bin/sh", "-c", checked) if isinstance(checked, str) else checked


def _files(files: Mapping[str, str | bytes] | None) -> dict[str, str | bytes]:
    if files is None:
        return {}
    if not isinstance(files, Mapping):
        raise ConfigError(f"files must be a mapping of file name to content, not {files!r}")
    checked: dict[str, str | bytes] = {}
    for name, content in files.items():
        path = PurePosixPath(name) if isinstance(name, str) else None
        if (
            path is None
            or not name
            or path.is_absolute()
            or ".." in path.parts
            or str(path) in ("", ".")
            or "\0" in name
        ):
            raise ConfigError(f"files: {name!r} is not a relative file name inside the work folder")
        if not isinstance(content, str | bytes):
            kind = type(content).__name__
            raise ConfigError(f"files[{name!r}] must be text or bytes, not {kind}")
        if isinstance(content, str) and not _utf8(content):
            raise ConfigError(
                f"files[{name!r}] is text that cannot be written as UTF-8 (a lone "
                "surrogate): give its bytes"
            )
        if str(path) in checked:
            raise ConfigError(f"files: {name!r} names a file named before (as {str(path)!r})")
        checked[str(path)] = content
    _no_file_in_a_file(files, checked)
    return checked


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _no_file_in_a_file(named: Mapping[str, object], files: Mapping[str, object]) -> None:
    """A file is no folder: one named inside another could not be written (the
    sandbox's own program would fail, as if the command had)."""
    for name in named:
        for parent in PurePosixPath(name).parents:
            if str(parent) in files:
                raise ConfigError(
                    f"files: {name!r} cannot be written inside the file {str(parent)!r}"
                )


def hidden_paths(hidden: Sequence[str | os.PathLike[str]], isolation: Isolation) -> list[str]:
    """``hidden`` as `sandbox` takes it, checked (a scorer's, before any trial runs)."""
    hide = _host_paths(hidden, "hidden", "a list of host paths")
    if hide and isolation == "none":
        raise ConfigError(
            f"hidden paths need isolation='bubblewrap': without it the command reads "
            f"{hide[0]!r} as this process can"
        )
    return hide


def _host_paths(paths: Sequence[str | os.PathLike[str]], name: str, kind: str) -> list[str]:
    # Not a flag (a store's read_only is one) nor one path, read letter by letter.
    if isinstance(paths, str | bytes | os.PathLike) or not isinstance(paths, Iterable):
        raise ConfigError(f"{name} must be {kind}, not {paths!r}")
    given = [os.fspath(path) for path in paths]
    for path in given:
        if not os.path.isabs(path) or not os.path.exists(path):
            raise ConfigError(f"{name}: {path!r} is not an existing absolute path")
    return given


def _environment(home: str, extra: Mapping[str, str], tmp: str = "/tmp") -> dict[str, str]:
    path = f"{os.path.dirname(os.path.abspath(sys.executable))}:/usr/local/bin:/usr/bin:/bin"
    return {"PATH": path, "HOME": home, "TMPDIR": tmp, "LANG": "C.UTF-8", **extra}


def _bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise ConfigError(
            "corral.sandbox needs bubblewrap (the bwrap program; on Debian or Ubuntu: "
            "apt-get install bubblewrap), or isolation='none' to run the command "
            "without isolation"
        )
    return found


def _bwrap_failed(ended: Ended) -> bool:
    """bubblewrap itself refused (no user namespaces in a container, say): not the command."""
    return (
        ended.returncode == 1
        and not ended.stdout
        and not ended.timed_out
        and ended.stderr.startswith(b"bwrap: ")
    )


#: The uids this event loop's sandboxes started as root hold while they run.
_held_uids: anyio.lowlevel.RunVar[set[int]] = anyio.lowlevel.RunVar("corral_sandbox_uids")


@contextmanager
def _own_uid(draw: Callable[[int], int] = random.randrange) -> Iterator[int]:
    """A uid for one sandbox started as root, none of this event loop's other running
    sandboxes holds: a process limit counts all of one uid's processes, so two
    sandboxes sharing a uid would share one limit (drawn at random: about once in
    16,000 sandboxes with 64 at once). Other processes draw at random."""
    try:
        held = _held_uids.get()
    except LookupError:
        held = set()
        _held_uids.set(held)
    uid = FIRST_UID + draw(UIDS)
    while uid in held:
        uid = FIRST_UID + (uid - FIRST_UID + 1) % UIDS
    held.add(uid)
    try:
        yield uid
    finally:
        held.discard(uid)


def _kill_sandbox(process: Process) -> None:
    """Kill the sandbox's pid 1, which ends every process in it; bubblewrap then reaps
    it and exits. Killing bubblewrap too would leave its child for the host's init to
    reap. Before bubblewrap has a child, its process group."""
    try:
        text = Path(f"/proc/{process.pid}/task/{process.pid}/children").read_text()
    except OSError:
        text = ""
    pids = [int(pid) for pid in text.split()]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it ended meanwhile
    if not pids:
        kill_group(process)


def _memfd(data: bytes) -> int:
    """A file descriptor holding ``data``, read from its start, that the command inherits
    (passed to it by name: closed on exec, so no other program started meanwhile gets it)."""
    fd = os.memfd_create("corral-sandbox-files", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
