"""Per-thread file-system credentials: run one request's file work as the agent user.

On Linux the fsuid, fsgid and supplementary groups belong to a thread, so a worker
thread can take the agent's identity for file access while the daemon's other threads
keep root's. With an fsuid other than 0 the kernel also drops the file-system
capabilities (CAP_DAC_OVERRIDE, CAP_FOWNER, CAP_CHOWN, ...) from the thread's
effective set, so permission checks are exactly the agent's. Root's identity comes
back when the block ends, whatever happened in it.
"""

import contextlib
import os
import threading
from typing import Iterator, Optional, Tuple

from . import syscalls
from .errors import DaemonError
from .users import UserInfo

_state = threading.local()
_own: Optional[Tuple[int, int, Tuple[int, ...]]] = None  # the daemon's fsuid, fsgid, groups


def _own_identity() -> Tuple[int, int, Tuple[int, ...]]:
    global _own
    if _own is None:
        _own = (os.geteuid(), os.getegid(), tuple(os.getgroups()))
    return _own


def current() -> Optional[UserInfo]:
    """The user this thread acts as, or None when it has the daemon's own credentials."""
    return getattr(_state, "user", None)


@contextlib.contextmanager
def acting_as(user: Optional[UserInfo]) -> Iterator[None]:
    """File access in the block runs with ``user``'s credentials (None: the daemon's own)."""
    if user is None or current() is not None:
        yield  # nothing to switch, or already switched by an enclosing block
        return
    uid, gid, groups = _own_identity()
    if user.uid == uid and user.gid == gid:
        yield
        return
    if uid != 0:
        raise DaemonError("permission_denied", "the daemon (uid %d) cannot act as uid %d" % (uid, user.uid))
    if not syscalls.CAN_SWITCH_FS_CREDS:
        raise DaemonError("permission_denied", "cannot switch file credentials on this system")
    effective = False
    try:
        try:
            syscalls.setgroups_thread(user.groups)
            syscalls.setfsgid(user.gid)
            syscalls.setfsuid(user.uid)
            # setfsuid/setfsgid report no errors: read back (an invalid id changes nothing).
            if syscalls.setfsuid(0xFFFFFFFF) != user.uid or syscalls.setfsgid(0xFFFFFFFF) != user.gid:
                # gVisor keeps no separate fsuid: switch this thread's effective ids instead (the
                # saved uid stays root's, so the block's end can switch back).
                effective = True
                syscalls.setegid_thread(user.gid)
                syscalls.seteuid_thread(user.uid)
        except OSError as exc:
            raise DaemonError("permission_denied", "cannot take the credentials of uid %d: %s" % (user.uid, exc)) from None
        if effective and (os.geteuid() != user.uid or os.getegid() != user.gid):
            raise DaemonError("permission_denied", "cannot take the credentials of uid %d" % user.uid)
        _state.user = user
        yield
    finally:
        _state.user = None
        if effective:
            syscalls.seteuid_thread(uid)
            syscalls.setegid_thread(gid)
        syscalls.setfsuid(uid)
        syscalls.setfsgid(gid)
        syscalls.setgroups_thread(groups)
