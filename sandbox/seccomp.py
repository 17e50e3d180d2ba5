"""The seccomp filters of commands: no metadata changes (level safe), and no internet sockets
where nothing else keeps a command off TCP.

Landlock has no right for a file's mode, owner, times or extended attributes, and gVisor
has no Landlock at all; so a command confined to safe also runs under this filter, which
fails every system call that changes them with EPERM (chmod, chown and utime families,
setxattr and removexattr; their fd forms too, since a file opened for reading anywhere
would do). The program is built here once and travels in the clone's request
(``clone_request``); clone_exec.c and the Python clone both install it as given, after
Landlock and before the ids change, so none of the command runs without it.

Landlock keeps every command of a session without network off TCP (bind and connect, the
egress relay's port excepted). Where it cannot (gVisor has no Landlock; kernels before ABI 4
have no TCP rights), a command of such a session runs under a filter that fails
``socket(AF_INET | AF_INET6, ...)`` with EACCES, so it can neither listen on loopback nor
reach what listens there (another command's server, at any level). A session with egress
needs those sockets for the relay: there the gap stays (docs/design.md).

System calls of another ABI than the daemon's (x86_64's 32-bit and x32 calls) fail with
ENOSYS under the filter: their numbers differ, and a filter that only knew the native
ones would let ``int 0x80`` chmod.
"""

import ctypes
import errno
import os
import struct
from typing import Dict, List, Optional, Tuple

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

# socket(2) by architecture, and the families a command without network may not make.
_SOCKET = {"x86_64": 41, "aarch64": 198}
_AF_INET, _AF_INET6 = 2, 10

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
# seccomp_data: nr, arch, instruction pointer, then the arguments (the low word of the first
# at 16 on a little-endian machine, as both known ones are).
_OFFSET_NR, _OFFSET_ARCH, _OFFSET_ARG0 = 0, 4, 16
_INSN = struct.Struct("<HBBI")
SECCOMP_MODE_FILTER = 2
PR_SET_SECCOMP = 22


def _insn(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return _INSN.pack(code, jt, jf, k)


def _build(machine: str, metadata: bool, inet: bool) -> bytes:
    """The program for ``machine``'s native ABI: ``metadata`` calls fail with EPERM, ``inet``
    sockets with EACCES; empty where this module knows no numbers."""
    arch = _ARCHES.get(machine)
    if arch is None or not (metadata or inet):
        return b""
    audit_arch, foreign_from, calls = arch
    # Each instruction: code, k, and the labels its true and false branches jump to (None: the
    # next one); resolved below, a jump going to target - itself - 1.
    prog: List[Tuple[int, int, Optional[str], Optional[str]]] = [
        (_LD_W_ABS, _OFFSET_ARCH, None, None), (_JEQ_K, audit_arch, None, "foreign"), (_LD_W_ABS, _OFFSET_NR, None, None)
    ]
    if foreign_from is not None:
        prog.append((_JGE_K, foreign_from, "foreign", None))
    prog += [(_JEQ_K, number, "deny", None) for number in (sorted(set(calls.values())) if metadata else [])]
    if inet:
        prog.append((_JEQ_K, _SOCKET[machine], "family", None))
    labels = {"deny": len(prog) + 1, "foreign": len(prog) + 2}
    prog += [(_RET_K, _RET_ALLOW, None, None), (_RET_K, _RET_ERRNO | errno.EPERM, None, None),
             (_RET_K, _RET_ERRNO | errno.ENOSYS, None, None)]
    if inet:
        labels["family"], labels["refuse"] = len(prog), len(prog) + 4
        prog += [
            (_LD_W_ABS, _OFFSET_ARG0, None, None),
            (_JEQ_K, _AF_INET, "refuse", None),
            (_JEQ_K, _AF_INET6, "refuse", None),
            (_RET_K, _RET_ALLOW, None, None),
            (_RET_K, _RET_ERRNO | errno.EACCES, None, None),
        ]
    return b"".join(
        _insn(code, k, 0 if jt is None else labels[jt] - i - 1, 0 if jf is None else labels[jf] - i - 1)
        for i, (code, k, jt, jf) in enumerate(prog)
    )


_MACHINE = os.uname().machine
METADATA_FILTER = _build(_MACHINE, True, False)
_FILTERS = {(metadata, inet): _build(_MACHINE, metadata, inet) for metadata in (False, True) for inet in (False, True)}


def program(metadata: bool, inet: bool) -> bytes:
    """The filter forbidding metadata changes and/or internet sockets (empty: neither, or an
    architecture this module knows no numbers of)."""
    return _FILTERS[(metadata, inet)]


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
