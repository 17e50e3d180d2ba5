"""libc and raw Linux system calls through ctypes, bound once at import.

Bound functions are plain calls afterwards, so they are safe between fork and exec
(no import, no lookup). Each binding is None where the libc or kernel lacks it.
"""

import ctypes
import os
from typing import Callable, Optional

PR_SET_CHILD_SUBREAPER = 36

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


def _bind_renameat2() -> Optional[Callable[..., int]]:
    try:
        func = _libc.renameat2  # type: ignore[union-attr]
    except AttributeError:
        return None  # a libc without renameat2 (glibc < 2.28, musl < 1.2.?)
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int

    def noreplace(src_dir: int, src: str, dst_dir: int, dst: str) -> int:
        """renameat2(RENAME_NOREPLACE); 0 or the errno."""
        if func(src_dir, os.fsencode(src), dst_dir, os.fsencode(dst), 1) == 0:
            return 0
        return ctypes.get_errno()

    return noreplace


rename_noreplace = _bind_renameat2()
