"""The seccomp filter bubblewrap sets before the sandbox's pid 1 starts: its processes make
no user namespace of their own. In one, a process holds every capability over its own
mounts, so it could mount a tmpfs (half the host's memory) past the sandbox's ``disk``."""

from __future__ import annotations

import platform
import struct

CLONE_NEWUSER = 0x10000000
EPERM, ENOSYS = 1, 38
#: Per machine: its audit architecture and the numbers of unshare, clone and clone3.
_MACHINES = {
    "x86_64": (0xC000003E, 272, 56, 435),
    "aarch64": (0xC00000B7, 97, 220, 435),
}
# Classic BPF: load a word of `struct seccomp_data`, jump if equal / at least / any bit
# set (jumps count the instructions skipped), return.
_LOAD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _ERRNO, _KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
#: Where `struct seccomp_data` holds the syscall's number, architecture and flags (the
#: low half of its first argument: both machines are little-endian).
_NR, _ARCH, _FLAGS = 0, 4, 16


def no_user_namespaces() -> bytes | None:
    """The filter, as bubblewrap's ``--seccomp`` reads it; None on another machine.

    unshare and clone asking for a user namespace fail with EPERM; clone3 (whose flags a
    filter cannot read) with ENOSYS, so the C library falls back to clone; another ABI
    (32-bit x86, x32) ends the process."""
    machine = _MACHINES.get(platform.machine())
    if machine is None:
        return None
    arch, unshare, clone, clone3 = machine
    program = [
        (_LOAD, 0, 0, _ARCH),
        (_JEQ, 1, 0, arch),
        (_RET, 0, 0, _KILL_PROCESS),
        (_LOAD, 0, 0, _NR),
        (_JGE, 0, 1, 0x40000000),  # x32's numbers
        (_RET, 0, 0, _KILL_PROCESS),
        (_JEQ, 5, 0, clone3),
        (_JEQ, 1, 0, unshare),
        (_JEQ, 0, 2, clone),
        (_LOAD, 0, 0, _FLAGS),
        (_JSET, 2, 0, CLONE_NEWUSER),
        (_RET, 0, 0, _ALLOW),
        (_RET, 0, 0, _ERRNO | ENOSYS),
        (_RET, 0, 0, _ERRNO | EPERM),
    ]
    return b"".join(struct.pack("<HBBI", *instruction) for instruction in program)
