"""How one `corral.sandbox` run starts: bubblewrap's command line, and the small program
that, inside it, writes the work files, sets the limits and becomes the command."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

#: The private work folder, as the command sees it (bubblewrap).
WORKDIR = "/sandbox"
#: Host folders the command sees, read-only: the system's programs and libraries.
SYSTEM = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: The first uid taken by a sandbox started as root (each run draws its own above it).
FIRST_UID = 1_000_000
UIDS = 1_000_000

# Runs as `python -I -S -c WRAPPER UID FD STARTED STATUS WORKDIR REAP LIMITS COMMAND...`, and
# imports next to nothing (no json, no enum-based signal): it starts every execution.
# The command's process drops to the uid, then writes the files (they belong to the
# command's user). Pid 1 keeps its own: a new uid would clear the parent-death signal
# bubblewrap (--die-with-parent) set, which root's bubblewrap could not deliver to another
# uid's process anyway, so the sandbox would outlive a runner killed outright; and the
# command cannot signal it. Not of the uid, it is not counted in the process limit: one
# fewer is set.
# Under bubblewrap it is the sandbox's pid 1 (--as-pid-1): it forks the command,
# reaps every orphan until the command ends, then ends with its status (128 + N for
# signal N, as a shell); its end ends every process left in the sandbox. So
# bubblewrap waits for it, it for the command, and no process is left to the host's
# init (bubblewrap's own init would be: its parent does not wait for it).
# As pid 1 it cannot end by a signal, so 128 + N is ambiguous: it also writes the
# command's own status (negative: its signal) to the STATUS file, and first marks
# STARTED (then closed, out of the command's reach): bubblewrap's own failures come
# before it.
# The limits are set in the command's process alone.
WRAPPER = r"""
import os, resource, sys, _signal
uid, files_fd, started_fd, status_fd, workdir, reap, limits = sys.argv[1:8]
argv = sys.argv[8:]
if started_fd:
    os.write(int(started_fd), b"1")
    os.close(int(started_fd))


def start():
    if uid:
        os.setgroups([])
        os.setgid(int(uid))
        os.setuid(int(uid))
    if files_fd:
        with os.fdopen(int(files_fd), "rb") as source:
            data = source.read()
        at = 0
        while at < len(data):
            size = int.from_bytes(data[at : at + 8], "big")
            name = data[at + 8 : at + 8 + size].decode()
            at += 8 + size
            size = int.from_bytes(data[at : at + 8], "big")
            path = os.path.join(workdir, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as out:
                out.write(data[at + 8 : at + 8 + size])
            at += 8 + size
    os.chdir(workdir)
    if status_fd:
        os.close(int(status_fd))
    for limit in filter(None, limits.split(",")):
        name, soft, hard = limit.split(":")
        fewer = 1 if name == "RLIMIT_NPROC" and uid and reap == "1" else 0  # pid 1: not the uid's
        resource.setrlimit(getattr(resource, name), (int(soft) - fewer, int(hard) - fewer))
    # Python ignores these; an ignored signal stays ignored across exec.
    _signal.signal(_signal.SIGPIPE, _signal.SIG_DFL)
    _signal.signal(_signal.SIGXFSZ, _signal.SIG_DFL)
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        sys.stderr.write(f"corral.sandbox: cannot run {argv[0]!r}: {exc.strerror}\n")
        sys.stderr.flush()
        os._exit(127)


if reap != "1":
    start()
command = os.fork()
if command == 0:
    start()
while True:
    died, status = os.wait()
    if died == command:
        break
code = os.waitstatus_to_exitcode(status)
if status_fd:
    os.write(int(status_fd), str(code).encode())
os._exit(128 - code if code < 0 else code)
"""


@dataclass(frozen=True, slots=True)
class Limits:
    """The resource limits of one run (None: not limited)."""

    cpu_seconds: int | None
    memory: int | None
    processes: int | None
    file_size: int | None

    def rlimits(self, processes: bool) -> list[tuple[str, int, int]]:
        """``(RLIMIT_NAME, soft, hard)``; the CPU's hard limit a second later, so the
        command gets SIGXCPU (a reason we can name) before SIGKILL."""
        chosen: list[tuple[str, int, int]] = [("RLIMIT_CORE", 0, 0)]
        if self.cpu_seconds is not None:
            chosen.append(("RLIMIT_CPU", self.cpu_seconds, self.cpu_seconds + 1))
        if self.memory is not None:
            chosen.append(("RLIMIT_AS", self.memory, self.memory))
        if self.file_size is not None:
            chosen.append(("RLIMIT_FSIZE", self.file_size, self.file_size))
        if processes and self.processes is not None:
            chosen.append(("RLIMIT_NPROC", self.processes, self.processes))
        return chosen


def encode_files(files: Mapping[str, str | bytes]) -> bytes:
    """The work files as the wrapper reads them: each name, then its content, each
    after its length (8 bytes, big-endian)."""
    parts = []
    for name, content in files.items():
        for part in (name.encode(), content.encode() if isinstance(content, str) else content):
            parts += [len(part).to_bytes(8, "big"), part]
    return b"".join(parts)


def wrapper_command(
    command: Sequence[str],
    *,
    workdir: str,
    limits: Limits,
    uid: int | None,
    files_fd: int | None,
    isolated: bool,
    started_fd: int | None = None,
    status_fd: int | None = None,
) -> list[str]:
    """This Python running `WRAPPER`: as the sandbox's pid 1 when ``isolated`` (it then
    also limits the processes, which it cannot do on the host: they count the user's)."""
    spec = [
        "" if uid is None else str(uid),
        "" if files_fd is None else str(files_fd),
        "" if started_fd is None else str(started_fd),
        "" if status_fd is None else str(status_fd),
        workdir,
        "1" if isolated else "0",
        ",".join(f"{name}:{soft}:{hard}" for name, soft, hard in limits.rlimits(isolated)),
    ]
    return [sys.executable, "-I", "-S", "-c", WRAPPER, *spec, *command]


def bwrap_command(
    bwrap: str,
    inner: Sequence[str],
    *,
    network: bool,
    disk: int,
    read_only: Iterable[str],
    env: Mapping[str, str],
    as_root: bool,
    seccomp_fd: int | None = None,
    hidden: Iterable[str] = (),
) -> list[str]:
    """bubblewrap around ``inner``: a fresh root holding the system read-only, a
    private ``/sandbox`` and ``/tmp`` (size-bounded memory), new pid, ipc, uts and
    (unless ``network``) network namespaces, and no environment but ``env``.

    As root there is no user namespace: bubblewrap keeps only the right to change
    uid, which the wrapper uses to become a uid of its own (root's processes are
    never counted against a process limit).

    ``seccomp_fd`` holds the filter keeping its processes from making user namespaces
    (`corral._sandbox_seccomp`). Each of ``hidden`` is covered: a folder by an empty
    read-only one, a file by ``/dev/null`` (which a bind mount, never of devices, lets
    no one open).
    """
    args = [bwrap, "--die-with-parent", "--as-pid-1", "--clearenv"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    for name, value in env.items():
        args += ["--setenv", name, value]
    args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not network:
        args.append("--unshare-net")
    if as_root:
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args.append("--unshare-user")
    args += _system_mounts()
    # /dev and the root are memory bubblewrap makes, unbounded and (in a user namespace)
    # the command's own: read-only, so only the bounded /tmp, /dev/shm (POSIX shared
    # memory and semaphores: Python's multiprocessing) and work folder hold data.
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--perms", "1777", "--size", str(disk), "--tmpfs", "/dev/shm"]
    args += ["--remount-ro", "/dev"]
    args += ["--perms", "1777", "--size", str(disk), "--tmpfs", "/tmp"]
    args += ["--perms", "0777" if as_root else "0755", "--size", str(disk), "--tmpfs", WORKDIR]
    args += _extra_mounts(read_only)
    for path in hidden:
        if os.path.isdir(path):
            args += ["--perms", "0555", "--size", "4096", "--tmpfs", path, "--remount-ro", path]
        else:
            args += ["--ro-bind", os.devnull, path]
    return [*args, "--remount-ro", "/", "--chdir", WORKDIR, "--", *inner]


def _system_mounts() -> list[str]:
    """The system folders, read-only (a merged-/usr link stays a link)."""
    args: list[str] = []
    for path in SYSTEM:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args


def _extra_mounts(extra: Iterable[str]) -> list[str]:
    """Other read-only folders, their missing parents made traversable (bubblewrap
    would copy a parent's mode, and ``/root`` is 0700)."""
    args: list[str] = []
    kept: list[str] = []
    for path in sorted({os.path.abspath(p) for p in extra}):
        if not os.path.exists(path):
            continue
        if any(_within(path, done) for done in [*SYSTEM, *kept]):
            continue
        kept.append(path)
    made: set[str] = set()
    for path in kept:
        parents = []
        parent = os.path.dirname(path)
        while parent not in ("/", "") and parent not in made:
            parents.append(parent)
            made.add(parent)
            parent = os.path.dirname(parent)
        for folder in reversed(parents):
            args += ["--perms", "0755", "--dir", folder]
        args += ["--ro-bind", path, path]
    return args


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def interpreter_folders() -> list[str]:
    """Where this Python lives (a virtualenv and its base), so the command can run it."""
    return [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
