"""Preload statx-compat where the kernel refuses statx's AT_NO_AUTOMOUNT (gVisor of late 2022).

There coreutils' ``ls DIR`` and ``stat`` fail with "Invalid argument" for every path. The
library (statx_compat.c, shipped beside this file when the host could compile it) retries the
call without the flag. It goes into /etc/ld.so.preload, so every program of the session gets
it whatever its environment; the file is root's, so the agent cannot change what it loads.
"""

import ctypes
import errno
import logging
import os
from typing import Optional

log = logging.getLogger("caisson-sandbox")

LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "statx-compat.so")
PRELOAD = "/etc/ld.so.preload"
AT_FDCWD = -100
AT_NO_AUTOMOUNT = 0x800
STATX_TYPE = 0x1


def _refused() -> Optional[bool]:
    """Whether statx("/", AT_NO_AUTOMOUNT) fails with EINVAL; None where libc has no statx."""
    try:
        statx = ctypes.CDLL(None, use_errno=True).statx
    except (OSError, AttributeError):
        return None
    buf = ctypes.create_string_buffer(256)
    if statx(AT_FDCWD, b"/", AT_NO_AUTOMOUNT, STATX_TYPE, buf) == 0:
        return False
    return ctypes.get_errno() == errno.EINVAL


def install() -> bool:
    """Preload the library if this kernel needs it and it is here; True when it is in force."""
    if not _refused():
        return False
    if not os.path.isfile(LIBRARY):
        log.warning("this kernel refuses statx's AT_NO_AUTOMOUNT and statx-compat is missing: ls and stat will fail")
        return False
    try:
        with open(PRELOAD) as f:
            if LIBRARY in f.read().split():
                return True
    except FileNotFoundError:
        pass
    try:
        with open(PRELOAD, "a") as f:
            f.write(LIBRARY + "\n")
    except OSError as exc:  # not root, or a read-only root file system
        log.warning("cannot preload statx-compat (%s): ls and stat will fail", exc)
        return False
    return True
