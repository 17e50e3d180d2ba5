"""The ping op: what this daemon is and what the kernel under it can enforce."""

import os
import platform
import shutil
from typing import Any, Callable, Dict

from . import __version__, landlock, proctable, views
from .errors import Reply
from .protocol import PROTOCOL_VERSION
from .spawner import HAS_CLONE_EXEC


def op_ping(args: Dict[str, Any], blob: bytes) -> Reply:
    # Answered once the first command would find everything made: a warm pool hands out
    # only containers whose daemon answered (see caisson.docker.pool).
    proctable.wait_warm()
    return (
        {
            "version": __version__,
            "protocol": PROTOCOL_VERSION,
            "python": platform.python_version(),
            "rg": shutil.which("rg"),
            "pid": os.getpid(),
            "uid": os.getuid(),
            "landlock": landlock.abi(),
            # What enforces the permission levels on commands: Landlock, else read-only views.
            "levels": "landlock" if landlock.abi() > 0 else ("views" if views.usable() else None),
            "clone_exec": HAS_CLONE_EXEC,
        },
        b"",
    )


OPS: Dict[str, Callable[[Dict[str, Any], bytes], Reply]] = {"ping": op_ping}
