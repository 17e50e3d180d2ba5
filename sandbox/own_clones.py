"""Clones the daemon makes itself, where the kernel ignores CLONE_PARENT (gVisor): there the
spawner's clones would be the spawner's children, not the daemon's, so the daemon starts
each clone-exec clone with posix_spawn, ahead of need, on a thread of its own (``Ahead``).
"""

import collections
import ctypes
import errno
import logging
import os
import signal
import socket
import threading
import time
from typing import Deque, List, Optional, Tuple

from . import syscalls
from .limits import PROCESSES

log = logging.getLogger("caisson.spawner")

# The native spawner and clone (clone_exec.c), where the image has one.
CLONE_EXEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "clone-exec")
HAS_CLONE_EXEC = os.access(CLONE_EXEC, os.X_OK)
# The descriptor the daemon's socket takes in clone-exec.
CLONE_EXEC_SOCKET = 3
# Commands start with default dispositions (Python ignores SIGPIPE and SIGXFSZ; the daemon
# installs handlers).
DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# After a clone could not be made ahead, the maker waits this long before it tries again.
MAKE_RETRY = 0.5

Clone = Tuple[int, socket.socket]


class Ahead:
    """Clones made ahead by a thread of their own, off the daemon's spawn lock: under gVisor a
    clone takes about 6 ms to make, and the next command, arriving while it is made, would
    otherwise wait for it. The daemon's interpreter lock is free meanwhile (see posix_spawn)."""

    def __init__(self) -> None:
        self._ready: Deque[Clone] = collections.deque()
        self._making = 0  # on their way
        self._goal = 0
        self._cond = threading.Condition()
        self._thread: Optional[threading.Thread] = None

    def keep(self, goal: int) -> None:
        """Keep ``goal`` clones made or on their way."""
        with self._cond:
            self._goal = goal
            if self._thread is None:
                self._thread = threading.Thread(target=self._make, name="caisson-clones", daemon=True)
                self._thread.start()
            self._cond.notify()

    def put(self, clone: Clone) -> None:
        with self._cond:
            self._ready.append(clone)

    def take(self) -> Optional[Clone]:
        """The oldest clone made, or None. The next is made at the next ``keep``, once the
        command's reply is on its way, rather than now, beside the command."""
        with self._cond:
            return self._ready.popleft() if self._ready else None

    def _make(self) -> None:
        while True:
            with self._cond:
                while len(self._ready) + self._making >= self._goal:
                    self._cond.wait()
                self._making += 1
            made = None
            try:
                made = spawn_clone()
            except OSError as exc:  # out of processes or memory: the next command makes its own
                log.warning("cannot make a clone ahead: %s", exc)
            with self._cond:
                if made is not None:
                    self._ready.append(made)
                self._making -= 1
            if made is None:
                time.sleep(MAKE_RETRY)


def spawn_clone() -> Tuple[int, socket.socket]:
    """clone-exec as one clone, started with posix_spawn: a vfork, so nothing of the daemon's
    memory is copied (under gVisor a fork of the daemon took 15-25 ms, this about 6), and
    only its socket and /dev/null as stdio are inherited."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        pid = posix_spawn([CLONE_EXEC, "clone", str(PROCESSES)], theirs.fileno())
    finally:
        theirs.close()
    return pid, ours


# glibc's and musl's POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK.
_SPAWN_FLAGS = 0x04 | 0x08
# Room for any libc's posix_spawnattr_t, posix_spawn_file_actions_t or sigset_t.
_OPAQUE = 1024


def _ok(err: int) -> None:
    if err:
        raise OSError(err, os.strerror(err))


def posix_spawn(argv: List[str], sock: int) -> int:
    """posix_spawn(3) of ``argv`` with /dev/null as stdio, ``sock`` as descriptor 3, no
    environment, and default dispositions, called through ctypes, which lets go of the
    interpreter's lock for the call. Python's ``os.posix_spawn`` holds it throughout, and
    under gVisor the vfork and exec take about 6 ms, during which no other thread of the
    daemon (the one reading the next request, the reaper) could run."""
    libc = syscalls._libc
    if libc is None:
        raise OSError(errno.ENOSYS, "no libc")
    actions, attr, defaults, empty = (ctypes.create_string_buffer(_OPAQUE) for _ in range(4))
    _ok(libc.posix_spawn_file_actions_init(actions))
    _ok(libc.posix_spawnattr_init(attr))
    given = os.dup(sock) if sock == CLONE_EXEC_SOCKET else sock  # a dup2 onto itself keeps close-on-exec
    try:
        libc.sigemptyset(defaults)
        libc.sigemptyset(empty)
        for signum in DEFAULT_SIGNALS:
            libc.sigaddset(defaults, int(signum))
        _ok(libc.posix_spawn_file_actions_addopen(actions, 0, os.fsencode(os.devnull), os.O_RDWR, 0))
        _ok(libc.posix_spawn_file_actions_adddup2(actions, 0, 1))
        _ok(libc.posix_spawn_file_actions_adddup2(actions, 0, 2))
        _ok(libc.posix_spawn_file_actions_adddup2(actions, given, CLONE_EXEC_SOCKET))
        _ok(libc.posix_spawnattr_setsigdefault(attr, defaults))
        _ok(libc.posix_spawnattr_setsigmask(attr, empty))
        _ok(libc.posix_spawnattr_setflags(attr, ctypes.c_short(_SPAWN_FLAGS)))
        args = (ctypes.c_char_p * (len(argv) + 1))(*(os.fsencode(a) for a in argv), None)
        environ = (ctypes.c_char_p * 1)(None)
        pid = ctypes.c_int(0)
        _ok(libc.posix_spawn(ctypes.byref(pid), os.fsencode(argv[0]), actions, attr, args, environ))
        return pid.value
    finally:
        if given != sock:
            os.close(given)
        libc.posix_spawn_file_actions_destroy(actions)
        libc.posix_spawnattr_destroy(attr)
