"""Landlock confinement of commands: the level the host approved, enforced by the kernel.

A ruleset is built in the daemon (``ruleset_for``) and applied in the command's clone
before exec (``spawner``) with two calls (no_new_privs, landlock_restrict_self); every
descendant inherits it. Levels:

* ``safe``: read and execute everywhere; write only /dev/null, /dev/zero, /dev/full, /dev/tty.
* ``cautious``: as safe, plus every right beneath each of ``write_roots``, and beneath each
  entry of ``entry_roots`` that ``entries`` keeps (the agent's home: its dot entries and
  ``bin`` hold what programs run at start, so the home itself is no write root).
* ``dangerous``: no file-system restriction.

All levels: no TCP bind or connect unless ``network`` (ABI >= 4), except a connect to
``egress_port`` (the daemon's egress relay on loopback, the only interface), and, ABI >= 6, no
signals to processes outside the command's own domain (the daemon, other tasks) and no
abstract unix sockets outside it. The daemon, outside every domain, still signals and
kills confined processes.
"""

import ctypes
import errno
import os
import stat
import threading
from collections import OrderedDict
from typing import Any, List, NamedTuple, Optional, Tuple

from . import syscalls
from .errors import DaemonError

LEVELS = ("safe", "cautious", "dangerous")

ACCESS_FS_EXECUTE = 1 << 0
ACCESS_FS_WRITE_FILE = 1 << 1
ACCESS_FS_READ_FILE = 1 << 2
ACCESS_FS_READ_DIR = 1 << 3
ACCESS_FS_TRUNCATE = 1 << 14
ACCESS_FS_IOCTL_DEV = 1 << 15
ACCESS_NET_BIND_TCP = 1 << 0
ACCESS_NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1
RULE_PATH_BENEATH = 1
RULE_NET_PORT = 2
CREATE_RULESET_VERSION = 1 << 0
# The first ABI with TCP bind and connect rights.
TCP_ABI = 4
# Highest file-system right per ABI: 1: bits 0-12, 2: + REFER, 3-4: + TRUNCATE, 5+: + IOCTL_DEV.
_FS_BITS = {1: 13, 2: 14, 3: 15, 4: 15}
DEV_FILES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")


class _NetPort(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("port", ctypes.c_uint64)]


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("fs", ctypes.c_uint64), ("net", ctypes.c_uint64), ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_abi: Optional[int] = None


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (old kernel, disabled, gVisor)."""
    global _abi
    if _abi is None:
        _abi = 0
        if syscalls.syscall is not None:
            version = syscalls.syscall(syscalls.SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
            _abi = max(0, int(version))
    return _abi


class Confine(NamedTuple):
    level: str
    write_roots: Tuple[str, ...]
    network: bool
    egress_port: int = 0
    # Whether the command may change modes, owners, times and extended attributes
    # (Landlock cannot say; ``seccomp`` forbids them where not). By default only below safe.
    metadata: bool = True
    # Directories whose entries, not themselves, are write roots at cautious (``entries``).
    entry_roots: Tuple[str, ...] = ()


def entries(directory: str) -> Tuple[str, ...]:
    """The entries of ``directory`` a cautious command may write beneath: directories and
    files with one name, not named with a dot, not ``bin``, not links (a link would make its
    target a root; a second name may be a dot entry's). A new entry of the directory is
    refused, since nothing grants making one there."""
    kept = []
    try:
        with os.scandir(directory) as listing:
            for entry in listing:
                if entry.name.startswith(".") or entry.name == "bin":
                    continue
                st = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(st.st_mode) or (stat.S_ISREG(st.st_mode) and st.st_nlink == 1):
                    kept.append(os.path.join(directory, entry.name))
    except OSError:
        return ()  # nothing there (or not a directory): nothing to allow
    return tuple(sorted(kept))


def write_paths(confine: Confine) -> Tuple[str, ...]:
    """Where a command may write: the write roots and the entries kept of the entry roots."""
    if confine.level != "cautious":
        return ()
    return confine.write_roots + tuple(p for d in confine.entry_roots for p in entries(d))


def _absolute_paths(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(r, str) and r.startswith("/") and "\0" not in r for r in value)


def parse_confine(value: Any) -> Optional[Confine]:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise DaemonError("bad_request", "confine must be an object {level, write_roots, entry_roots, network, metadata}")
    level = value.get("level")
    if level not in LEVELS:
        raise DaemonError("bad_request", "confine.level must be one of %s" % ", ".join(LEVELS))
    roots = value.get("write_roots") or []
    entry_roots = value.get("entry_roots") or []
    if not _absolute_paths(roots) or not _absolute_paths(entry_roots):
        raise DaemonError("bad_request", "confine.write_roots and entry_roots must be lists of absolute paths")
    network = value.get("network", False)
    if not isinstance(network, bool):
        raise DaemonError("bad_request", "confine.network must be a boolean")
    port = value.get("egress_port", 0)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 65536:
        raise DaemonError("bad_request", "confine.egress_port must be a port number (0: none)")
    metadata = value.get("metadata", level != "safe")
    if not isinstance(metadata, bool):
        raise DaemonError("bad_request", "confine.metadata must be a boolean")
    return Confine(level, tuple(roots), network, port, metadata, tuple(entry_roots))


def _call(number: int, *args: Any) -> int:
    result = int(syscalls.syscall(number, *args))  # type: ignore[misc]
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def _add_path(ruleset: int, path: str, allowed: int, file_rights: int, follow: bool = True) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW))
    except OSError:
        return  # nothing there: nothing to allow
    try:
        st = os.fstat(fd)
        if not follow and (stat.S_ISLNK(st.st_mode) or (not stat.S_ISDIR(st.st_mode) and st.st_nlink != 1)):
            return  # swapped for a link, or given a second name, since it was listed
        if not stat.S_ISDIR(st.st_mode):
            allowed &= file_rights  # a file rule may only carry the rights of files
        attr = _PathBeneath(allowed, fd)
        _call(syscalls.SYS_LANDLOCK_ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(attr), 0)
    finally:
        os.close(fd)


# Rulesets built before, by confinement, with what each of their paths named then: a rule
# holds the inode its path named when it was added, so a ruleset is reused only while every
# path still names the same one (a stat each, against an open, a check and a syscall each).
_built: "OrderedDict[Confine, Tuple[int, Tuple[Optional[Tuple[int, int]], ...]]]" = OrderedDict()
_built_lock = threading.Lock()
_BUILT_MAX = 16


def _rule_paths(confine: Confine) -> Tuple[str, ...]:
    return ("/",) + DEV_FILES + write_paths(confine)


def _named(paths: Tuple[str, ...]) -> Tuple[Optional[Tuple[int, int]], ...]:
    named: List[Optional[Tuple[int, int]]] = []
    for path in paths:
        try:
            st = os.stat(path)  # followed, as the rule's open follows it
        except OSError:
            named.append(None)
        else:
            named.append((st.st_dev, st.st_ino))
    return tuple(named)


def ruleset_for(confine: Confine) -> Tuple[int, bool]:
    """A ruleset descriptor for ``confine`` (-1: nothing to apply; the caller closes it) and
    whether the command counts as confined (false only where the kernel has no Landlock)."""
    if abi() <= 0:
        return -1, False
    # Taken before a build: a path changed during it makes the next call build afresh.
    paths = _rule_paths(confine)
    named = _named(paths)
    with _built_lock:
        hit = _built.get(confine)
        if hit is not None and hit[1] == named:
            _built.move_to_end(confine)
            return (os.dup(hit[0]) if hit[0] >= 0 else -1), True
    ruleset, confined = _build(confine, paths[1 + len(DEV_FILES) :])
    with _built_lock:
        replaced = _built.pop(confine, None)
        _built[confine] = (os.dup(ruleset) if ruleset >= 0 else -1, named)
        dropped = [replaced] if replaced is not None else []
        while len(_built) > _BUILT_MAX:
            dropped.append(_built.popitem(last=False)[1])
    for fd, _ in dropped:
        if fd >= 0:
            os.close(fd)
    return ruleset, confined


def _build(confine: Confine, writable: Tuple[str, ...]) -> Tuple[int, bool]:
    version = abi()  # > 0: ruleset_for has checked
    fs_all = (1 << _FS_BITS.get(version, 16)) - 1
    read = (ACCESS_FS_EXECUTE | ACCESS_FS_READ_FILE | ACCESS_FS_READ_DIR | ACCESS_FS_IOCTL_DEV) & fs_all
    file_rights = (
        ACCESS_FS_EXECUTE | ACCESS_FS_WRITE_FILE | ACCESS_FS_READ_FILE | ACCESS_FS_TRUNCATE | ACCESS_FS_IOCTL_DEV
    ) & fs_all
    handled_fs = 0 if confine.level == "dangerous" else fs_all
    handled_net = ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP if version >= TCP_ABI and not confine.network else 0
    scoped = SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET if version >= 6 else 0
    if not (handled_fs or handled_net or scoped):
        return -1, True  # this kernel can enforce nothing more for this level
    attr = _RulesetAttr(handled_fs, handled_net, scoped)
    ruleset = _call(syscalls.SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)), 0)
    try:
        os.set_inheritable(ruleset, False)
        if handled_fs:
            _add_path(ruleset, "/", read, file_rights)
            for path in DEV_FILES:
                _add_path(ruleset, path, file_rights, file_rights)
            for i, path in enumerate(writable):
                # The entries of entry roots are opened without following a link.
                _add_path(ruleset, path, fs_all, file_rights, follow=i < len(confine.write_roots))
        if handled_net and confine.egress_port:
            port = _NetPort(ACCESS_NET_CONNECT_TCP, confine.egress_port)
            _call(syscalls.SYS_LANDLOCK_ADD_RULE, ruleset, RULE_NET_PORT, ctypes.byref(port), 0)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset, True


def restrict_self(ruleset: int) -> None:
    """Confine the calling thread (the child, before exec)."""
    if syscalls.prctl is None or syscalls.prctl(syscalls.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(errno.EPERM, "no_new_privs")
    _call(syscalls.SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0)

