"""libc and raw Linux system calls through ctypes, bound once at import.

Bound functions are plain calls afterwards, so they are safe between fork and exec
(no import, no lookup). Each binding is None where the libc or kernel lacks it.
"""

import ctypes
import os
import signal
from typing import Callable, Optional, Tuple

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1

try:
    _libc: Optional[ctypes.CDLL] = ctypes.CDLL(None, use_errno=True)
except OSError:
    _libc = None


def _bind_prctl() -> Optional[Callable[..., int]]:
    """libc prctl."""
    try:
        func = _libc.prctl  # type: ignore[union-attr]
    except AttributeError:
        return None
    func.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    func.restype = ctypes.c_int
    return func  # type: ignore[no-any-return]


prctl = _bind_prctl()


def set_subreaper() -> bool:
    """Make the calling process a child subreaper (orphans of its descendants come to it)."""
    if prctl is None:
        return False
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0


def set_parent_death_signal(signum: int) -> bool:
    """Have the kernel send ``signum`` to the calling process when its parent dies."""
    return prctl is not None and prctl(PR_SET_PDEATHSIG, signum, 0, 0, 0) == 0


RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def _bind_renameat2() -> Optional[Callable[..., int]]:
    """libc renameat2(src_dir, src, dst_dir, dst, flags); 0 or the errno."""
    try:
        func = _libc.renameat2  # type: ignore[union-attr]
    except AttributeError:
        return None  # a libc without renameat2 (glibc < 2.28, musl < 1.2.?)
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int

    def renameat2(src_dir: int, src: str, dst_dir: int, dst: str, flags: int) -> int:
        if func(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), flags) == 0:
            return 0
        return ctypes.get_errno()

    return renameat2


renameat2 = _bind_renameat2()


# ---------------------------------------------------------------- raw system calls

# Numbers that differ between architectures (setgroups, setfsuid, setfsgid); newer calls
# (openat2 437, landlock 444-446) have one number everywhere.
_ARCH_NUMBERS = {
    "x86_64": {"setgroups": 116, "setfsuid": 122, "setfsgid": 123, "setresuid": 117, "setresgid": 119, "clone": 56},
    "aarch64": {"setgroups": 159, "setfsuid": 151, "setfsgid": 152, "setresuid": 147, "setresgid": 149, "clone": 220},
}
SYS_OPENAT2 = 437
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446
PR_SET_NO_NEW_PRIVS = 38


def _bind_syscall() -> Optional[Callable[..., int]]:
    try:
        func = _libc.syscall  # type: ignore[union-attr]
    except AttributeError:
        return None
    func.restype = ctypes.c_long
    return func  # type: ignore[no-any-return]


syscall = _bind_syscall()
_numbers = _ARCH_NUMBERS.get(os.uname().machine, {})


def _checked(result: int) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


# -- per-thread credentials (the raw calls change the calling thread only; glibc's
# wrappers of setgroups and friends would change every thread of the daemon)

CAN_SWITCH_FS_CREDS = syscall is not None and bool(_numbers)


def setfsuid(uid: int) -> int:
    """Set this thread's fsuid; returns the previous one (the call reports no errors)."""
    return int(syscall(_numbers["setfsuid"], ctypes.c_uint(uid)))  # type: ignore[misc]


def setfsgid(gid: int) -> int:
    return int(syscall(_numbers["setfsgid"], ctypes.c_uint(gid)))  # type: ignore[misc]


def seteuid_thread(uid: int) -> None:
    """This thread's effective uid (real and saved stay: root can come back); the fsuid follows."""
    _checked(syscall(_numbers["setresuid"], ctypes.c_int(-1), ctypes.c_int(uid), ctypes.c_int(-1)))  # type: ignore[misc]


def setegid_thread(gid: int) -> None:
    _checked(syscall(_numbers["setresgid"], ctypes.c_int(-1), ctypes.c_int(gid), ctypes.c_int(-1)))  # type: ignore[misc]


def setgroups_thread(groups: Tuple[int, ...]) -> None:
    array = (ctypes.c_uint * max(1, len(groups)))(*groups)
    _checked(syscall(_numbers["setgroups"], ctypes.c_size_t(len(groups)), array))  # type: ignore[misc]


# -- clone

CLONE_PARENT = 0x00008000


def clone_parent() -> int:
    """fork(), except that the child is our parent's child (CLONE_PARENT); 0 in the child,
    the pid in the caller, or -errno. Only for single-threaded callers: the raw system call
    skips libc's fork handlers."""
    if syscall is None or "clone" not in _numbers:
        return -38  # ENOSYS
    flags = ctypes.c_ulong(CLONE_PARENT | signal.SIGCHLD)
    zero = ctypes.c_ulong(0)
    pid = int(syscall(_numbers["clone"], flags, zero, zero, zero, zero))
    return pid if pid >= 0 else -ctypes.get_errno()


# -- openat2

class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


RESOLVE_NO_XDEV = 0x01
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_BENEATH = 0x08


def openat2(dirfd: int, path: str, flags: int, mode: int, resolve: int) -> int:
    """openat2(2); raises OSError (ENOSYS where the kernel or a sandbox like gVisor lacks it)."""
    if syscall is None:
        raise OSError(38, "openat2 unavailable")  # ENOSYS
    tmpfile = getattr(os, "O_TMPFILE", -1)  # includes O_DIRECTORY's bit
    creates = flags & os.O_CREAT or flags & tmpfile == tmpfile
    how = _OpenHow(flags, mode if creates else 0, resolve)
    return _checked(
        syscall(SYS_OPENAT2, ctypes.c_int(dirfd), os.fsencode(path), ctypes.byref(how), ctypes.c_size_t(24))
    )
