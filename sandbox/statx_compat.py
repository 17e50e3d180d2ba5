"""Preload statx-compat where the kernel refuses statx's AT_NO_AUTOMOUNT (gVisor of late 2022).

There coreutils' ``ls DIR`` and ``stat`` fail with "Invalid argument" for every path. The
library (statx_compat.c, shipped beside this file when the host could compile it) retries the
call without the flag. It goes into /etc/ld.so.preload, so every program of the session gets
it whatever its environment; the file is root's, so the agent cannot change what it loads.

The list names a copy of the library in /dev, which gVisor serves from the sandbox's memory
(its own tmpfs): the image's copy is opened through gVisor's file server at every program
start, 0.7-1.0 ms more per start there. Where the kernel needs no help the list loses its
line again: a snapshot of a gVisor session carries it into any session made from it.
"""

import contextlib
import ctypes
import errno
import logging
import os
import shutil
from typing import Optional

log = logging.getLogger("caisson-sandbox")

LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "statx-compat.so")
PRELOAD = "/etc/ld.so.preload"
IN_MEMORY = "/dev/caisson-statx-compat.so"
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
        with contextlib.suppress(OSError):  # an unprivileged daemon's image has none of ours
            _list(None)
        return False
    if not os.path.isfile(LIBRARY):
        log.warning("this kernel refuses statx's AT_NO_AUTOMOUNT and statx-compat is missing: ls and stat will fail")
        return False
    try:
        _list(_in_memory() or LIBRARY)
    except OSError as exc:  # not root, or a read-only root file system
        log.warning("cannot preload statx-compat (%s): ls and stat will fail", exc)
        return False
    return True


def _in_memory() -> Optional[str]:
    """The library copied to IN_MEMORY (root's, read-only); None where /dev takes no file."""
    made = IN_MEMORY + ".new"
    try:
        shutil.copyfile(LIBRARY, made)
        os.chmod(made, 0o444)
        os.rename(made, IN_MEMORY)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(made)
        return None
    return IN_MEMORY


def _list(path: Optional[str]) -> None:
    """The preload list with ``path`` as this library's one line (None: none of its lines)."""
    try:
        with open(PRELOAD) as f:
            lines = f.read().split()
    except FileNotFoundError:
        lines = []
    kept = [line for line in lines if line not in (LIBRARY, IN_MEMORY)] + ([path] if path else [])
    if kept == lines:
        return
    if kept:
        with open(PRELOAD, "w") as f:
            f.write("".join(line + "\n" for line in kept))
    else:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(PRELOAD)
