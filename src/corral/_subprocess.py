"""`corral.subprocess`: run a command without blocking the run, bounded, leaving nothing behind."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from subprocess import DEVNULL, PIPE, CalledProcessError

import anyio
from anyio.abc import ByteReceiveStream, Process

from ._checks import flag, seconds
from ._concurrency import ConcurrencyScopes
from ._errors import ConfigError

#: A shell command line, or a program and its arguments.
Command = str | Sequence[str | os.PathLike[str]]


@dataclass(frozen=True, slots=True)
class SubprocessResult:
    """How a command ended and what it wrote (``stdout``/``stderr`` decoded as UTF-8)."""

    args: str | tuple[str, ...]
    returncode: int
    stdout_bytes: bytes = field(repr=False)
    stderr_bytes: bytes = field(repr=False)

    @property
    def stdout(self) -> str:
        """Standard output as text; bytes that are not UTF-8 become U+FFFD."""
        return self.stdout_bytes.decode("utf-8", "replace")

    @property
    def stderr(self) -> str:
        """Standard error as text; bytes that are not UTF-8 become U+FFFD."""
        return self.stderr_bytes.decode("utf-8", "replace")

    @property
    def success(self) -> bool:
        """Whether the command exited with status 0."""
        return self.returncode == 0


async def subprocess(
    args: Command,
    *,
    # The command's own deadline: a `fail_after` around the call would also count the wait.
    timeout: float | None = None,  # noqa: ASYNC109
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    input: bytes | str | None = None,
    check: bool = False,
) -> SubprocessResult:
    """Run ``args`` to completion and return its exit status and output.

    ``args`` is a program and its arguments, or a string run by the shell.
    ``env`` adds to (or overrides) this process's environment. ``input`` is
    written to the command's standard input, which is otherwise empty.

    At most ``max_subprocesses`` of the current run's calls run at once (see
    `ConcurrencyScopes`); the others wait their turn, first come, first served.
    ``timeout`` (seconds) counts from the start of the command, not the wait.

    The command starts in its own session. On timeout or cancellation its
    whole process group (the command and everything it started that stayed
    in the group) is killed with SIGKILL and the command is reaped before
    `TimeoutError` is raised or the cancellation propagates. A process that
    the command left running after exiting on its own is not touched.
    ``check=True`` raises `subprocess.CalledProcessError` on a non-zero exit.
    `ConfigError` for an empty command or a timeout that is not a positive number.
    """
    command = _command(args)
    seconds("timeout", timeout, or_none=True)
    extra_env = checked_env(env)
    flag("check", check)
    data = stdin_bytes(input)
    ended = await run_bounded(
        command, data, timeout, cwd=cwd, env=None if env is None else {**os.environ, **extra_env}
    )
    if ended.timed_out:
        raise TimeoutError(f"{command!r} did not finish within {timeout} s")
    stdout, stderr, returncode = ended.stdout, ended.stderr, ended.returncode
    if check and returncode != 0:
        raise CalledProcessError(returncode, command, stdout, stderr)
    return SubprocessResult(command, returncode, stdout, stderr)


def _command(args: Command) -> str | tuple[str, ...]:
    if isinstance(args, str):
        if not args.strip():
            raise ConfigError("the command to run is an empty string")
        return no_nul("the command", args)
    if isinstance(args, bytes) or not isinstance(args, Sequence) or not args:
        raise ConfigError(
            f"the command must be a string or a non-empty list of strings, not {args!r}"
        )
    return tuple(no_nul("the command", os.fspath(arg)) for arg in args)


def checked_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """The variables ``env`` adds, each a non-empty name without ``=`` and a text; any
    other is a `ConfigError` naming it, before the command starts (a number was a
    TypeError from deep in the process's start; an env that is no mapping, "A=1" say, a
    ValueError from ``dict``)."""
    if env is not None and not isinstance(env, Mapping):
        raise ConfigError(f"env must be a mapping of names to text or None, not {env!r}")
    extra = dict(env or {})
    for key, text in extra.items():
        if not isinstance(key, str) or not isinstance(text, str) or not key or "=" in key:
            raise ConfigError(f"env must map names to text, not {key!r}: {text!r}")
        no_nul("env", key), no_nul("env", text)
    return extra


def stdin_bytes(given: object) -> bytes | None:
    """What a command's standard input gets: ``given`` as UTF-8 if it is text, its bytes
    if bytes-like (a bytearray, a memoryview, as `subprocess.run` takes), None (an empty
    input) for None. Anything else is a `ConfigError` naming it, raised before the
    command starts: it would fail only once fed to the running command, as a TypeError
    from inside the task group writing it."""
    if given is None or isinstance(given, bytes):
        return given
    if isinstance(given, str):
        return given.encode()
    if isinstance(given, bytearray | memoryview):
        return bytes(given)
    raise ConfigError(f"input must be text, bytes or None, not {given!r}")


def no_nul(what: str, text: str) -> str:
    """``text`` itself; a NUL in it is a `ConfigError` naming it (no program can be
    given one: it would be a `ValueError` from deep in the process's start)."""
    if isinstance(text, str) and "\0" in text:
        raise ConfigError(f"{what} cannot hold a NUL character: {text!r}")
    return text


@dataclass(frozen=True, slots=True)
class Ended:
    """How a process run by `run_bounded` ended."""

    stdout: bytes
    stderr: bytes
    returncode: int
    #: Killed (with its group) when ``timeout`` ran out.
    timed_out: bool = False
    #: Killed (with its group) when a stream wrote more than ``max_output`` bytes.
    overflowed: bool = False


async def run_bounded(
    command: str | tuple[str, ...],
    data: bytes | None,
    timeout: float | None,  # noqa: ASYNC109
    *,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    pass_fds: Sequence[int] = (),
    max_output: int | None = None,
    kill: Callable[[Process], None] | None = None,
) -> Ended:
    """Run ``command`` in its own session under the run's subprocess bound.

    On timeout, on more than ``max_output`` bytes on either stream (the rest
    is read and dropped), or on cancellation the whole process group is killed
    with SIGKILL (or ``kill(process)`` is called) and the command reaped; a
    cancellation then propagates.
    """
    stop = _kill_group if kill is None else kill
    async with ConcurrencyScopes.current().subprocess_scope():
        # Shielded: a cancellation must not land between the fork and our holding the process.
        with anyio.CancelScope(shield=True):
            process = await anyio.open_process(
                command,
                stdin=DEVNULL if data is None else PIPE,
                stdout=PIPE,
                stderr=PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                pass_fds=pass_fds,
            )
        out: list[bytes] = []
        err: list[bytes] = []
        overflowed = False

        def overflow() -> None:
            nonlocal overflowed
            if not overflowed:
                overflowed = True
                stop(process)

        try:
            with anyio.move_on_after(timeout) as deadline:
                returncode = await _communicate(process, data, (out, err), max_output, overflow)
            if deadline.cancelled_caught:
                stop(process)
                with anyio.CancelScope(shield=True):
                    await process.aclose()
                killed = -signal.SIGKILL if process.returncode is None else process.returncode
                return Ended(b"".join(out), b"".join(err), killed, timed_out=True)
        except BaseException:
            with anyio.CancelScope(shield=True):
                # Kill the group before reaping the leader, whose pid names the group.
                stop(process)
                await process.aclose()
            raise
        await process.aclose()
    return Ended(b"".join(out), b"".join(err), returncode, overflowed=overflowed)


async def _communicate(
    process: Process,
    data: bytes | None,
    streams: tuple[list[bytes], list[bytes]],
    limit: int | None,
    overflow: Callable[[], None],
) -> int:
    out, err = streams
    # Read both pipes while writing input, so a command blocked on a full pipe cannot deadlock us.
    async with anyio.create_task_group() as tg:
        tg.start_soon(_drain, process.stdout, out, limit, overflow)
        tg.start_soon(_drain, process.stderr, err, limit, overflow)
        if process.stdin is not None:
            try:
                if data:
                    await process.stdin.send(data)
            except (anyio.BrokenResourceError, BrokenPipeError, ConnectionResetError):
                pass  # the command closed its input without reading it all, as `cat /dev/null` does
            finally:
                await process.stdin.aclose()
    return await process.wait()


async def _drain(
    stream: ByteReceiveStream | None,
    chunks: list[bytes],
    limit: int | None,
    overflow: Callable[[], None],
) -> None:
    if stream is None:
        return
    size = 0
    async for chunk in stream:
        if limit is None:
            chunks.append(chunk)
            continue
        if size < limit:
            chunks.append(chunk[: limit - size])
        size += len(chunk)
        if size > limit:
            overflow()


def kill_group(process: Process) -> None:
    """SIGKILL to the process group of ``process`` (run in a session of its own)."""
    _kill_group(process)


def _kill_group(process: Process) -> None:
    killpg = getattr(os, "killpg", None)
    try:
        if killpg is None:  # no process groups (Windows): the command alone
            process.kill()
        else:
            killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # every process of the group had already exited
