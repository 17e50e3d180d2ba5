"""Commands started as the daemon's own children, with no clone made ahead, where the kernel
ignores CLONE_PARENT (gVisor).

There each clone-exec clone was a program the daemon started ahead of need (``own_clones``):
a start as costly as the command's own, on every command, and under gVisor on two cores it
weighed on the next call (exec ``true`` took 13-17 ms back to back, 9 ms with 30 ms between
calls). clone-spawn.so is clone_exec.c built as a library: its ``caisson_spawn`` makes the
command's process with clone(CLONE_VM | CLONE_VFORK), which copies nothing of the daemon,
sets it up there (the same steps as a clone's) and execs it; the calling thread waits for
the exec, with the interpreter's lock let go (ctypes). A failure before the exec comes back
as the clone's would, and its process is reaped by the process table.
"""

import contextlib
import ctypes
import os
from typing import Optional, Sequence, Tuple

from .own_clones import DEFAULT_SIGNALS

LIBRARY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clone-spawn.so")

_DEFAULTS = (ctypes.c_int * len(DEFAULT_SIGNALS))(*(int(s) for s in DEFAULT_SIGNALS))


class DirectSpawn:
    """clone-spawn.so, loaded (OSError where it cannot be)."""

    def __init__(self, path: str = LIBRARY) -> None:
        lib = ctypes.CDLL(path, use_errno=True)
        lib.caisson_spawn.restype = ctypes.c_int
        lib.caisson_spawn.argtypes = [
            ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int,
            ctypes.c_ulong, ctypes.POINTER(ctypes.c_int), ctypes.c_int,
            ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int),
        ]
        self._spawn = lib.caisson_spawn
        self._devnull = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)

    def spawn(self, payload: bytes, fds: Sequence[int], processes: int) -> Tuple[int, int, int]:
        """Start the command of a clone request's ``payload`` (after its length) with ``fds``
        (in the request's order): its pid (0 if none was made), and the stage that failed and
        its errno (0, 0: it runs). ``processes``: its RLIMIT_NPROC as a user other than root."""
        given = (ctypes.c_int * len(fds))(*fds)
        stage, err = ctypes.c_int(0), ctypes.c_int(0)
        pid = self._spawn(
            payload, len(payload), given, len(fds), self._devnull, processes, _DEFAULTS, len(_DEFAULTS),
            ctypes.byref(stage), ctypes.byref(err),
        )
        return pid, stage.value, err.value


_loaded: Optional[DirectSpawn] = None
_tried = False


def loaded() -> Optional[DirectSpawn]:
    """The image's clone-spawn.so, or None where it is missing or does not load here."""
    global _loaded, _tried
    if not _tried:
        _tried = True
        with contextlib.suppress(OSError):
            _loaded = DirectSpawn()
    return _loaded
