"""The seccomp filter of a command that may not change metadata (level safe).

Landlock has no right for a file's mode, owner, times or extended attributes, and gVisor
has no Landlock at all; so a command confined to safe also runs under this filter, which
fails every system call that changes them with EPERM (chmod, chown and utime families,
setxattr and removexattr; their fd forms too, since a file opened for reading anywhere
would do). The program is built here once and travels in the clone's request
(``clone_request``); clone_exec.c and the Python clone both install it as given, after
Landlock and before the ids change, so none of the command runs without it.

System calls of another ABI than the daemon's (x86_64's 32-bit and x32 calls) fail with
ENOSYS under the filter: their numbers differ, and a filter that only knew the native
ones would let ``int 0x80`` chmod.
"""

import ctypes
import errno
import os
import struct
from typing import Dict, Optional, Tuple

from . import syscalls

# The native ABI of each architecture: its audit arch, the first number of a foreign ABI
# sharing it (x32 on x86_64), and the metadata calls by number.
_AUDIT_ARCH_X86_64 = 0xC000003E
_AUDIT_ARCH_AARCH64 = 0xC00000B7
_X32_BIT = 0x40000000
# fchmodat2 452, setxattrat 463, removexattrat 466: one number everywhere.
_COMMON = {"fchmodat2": 452, "setxattrat": 463, "removexattrat": 466}
_ARCHES: Dict[str, Tuple[int, Optional[int], Dict[str, int]]] = {
    "x86_64": (
        _AUDIT_ARCH_X86_64,
        _X32_BIT,
        {
            "chmod": 90, "fchmod": 91, "chown": 92, "fchown": 93, "lchown": 94, "utime": 132,
            "setxattr": 188, "lsetxattr": 189, "fsetxattr": 190, "removexattr": 197, "lremovexattr": 198,
            "fremovexattr": 199, "utimes": 235, "fchownat": 260, "futimesat": 261, "fchmodat": 268,
            "utimensat": 280, **_COMMON,
        },
    ),
    "aarch64": (
        _AUDIT_ARCH_AARCH64,
        None,
        {
            "setxattr": 5, "lsetxattr": 6, "fsetxattr": 7, "removexattr": 14, "lremovexattr": 15,
            "fremovexattr": 16, "fchmod": 52, "fchmodat": 53, "fchownat": 54, "fchown": 55,
            "utimensat": 88, **_COMMON,
        },
    ),
}

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_OFFSET_NR, _OFFSET_ARCH = 0, 4
_INSN = struct.Struct("<HBBI")
SECCOMP_MODE_FILTER = 2
PR_SET_SECCOMP = 22


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return _INSN.pack(code, jt, jf, k)


def _build(machine: str) -> bytes:
    """The program for ``machine``'s native ABI; empty where this module knows no numbers."""
    arch = _ARCHES.get(machine)
    if arch is None:
        return b""
    audit_arch, foreign_from, calls = arch
    numbers = sorted(set(calls.values()))
    # [0] load arch, [1] foreign arch?, [2] load nr, [3] foreign ABI? (x86_64), one check per
    # number, then allow, deny (EPERM), foreign (ENOSYS). A jump goes to target - itself - 1.
    first = 3 + (1 if foreign_from is not None else 0)
    allow = first + len(numbers)
    deny, foreign = allow + 1, allow + 2
    prog = [_insn(_LD_W_ABS, _OFFSET_ARCH), _insn(_JEQ_K, audit_arch, jf=foreign - 2), _insn(_LD_W_ABS, _OFFSET_NR)]
    if foreign_from is not None:
        prog.append(_insn(_JGE_K, foreign_from, jt=foreign - 4))
    for number in numbers:
        prog.append(_insn(_JEQ_K, number, jt=deny - len(prog) - 1))
    prog += [
        _insn(_RET_K, _RET_ALLOW),
        _insn(_RET_K, _RET_ERRNO | errno.EPERM),
        _insn(_RET_K, _RET_ERRNO | errno.ENOSYS),
    ]
    return b"".join(prog)


METADATA_FILTER = _build(os.uname().machine)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(program: bytes) -> None:
    """Install ``program`` on the calling thread (the clone, before exec); it and every
    descendant keep it. Sets no_new_privs, which an unprivileged filter needs."""
    prctl = syscalls.prctl
    if prctl is None or prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(errno.EPERM, "no_new_privs")
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _Fprog(len(program) // _INSN.size, ctypes.cast(buf, ctypes.c_void_p))
    if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
