"""Read-only views of the file system: the permission levels where the kernel has no
Landlock (gVisor).

gVisor (runsc 2022-12, measured) ignores MS_RDONLY on bind mounts, refuses remounts and
shares one mount table between namespaces, but honours read-only overlays and chroot. So
the daemon builds, per confinement, a view under ``BASE`` (root's, mode 0700): an overlay
of ``/`` with no upper layer (read-only, and live: it shows every later change below it),
the container's other mounts inside it (a fresh ``proc``; ``/dev``, ``/sys`` and files
bound as they are; directories, ``/tmp`` and ``/dev/shm`` among them, as read-only
overlays too), and, at cautious, each write root, and each entry kept of the entry roots
(``landlock.entries``: the home's, not the home), bound read-write at its own path. A
command confined to safe or cautious is chrooted into its view before its ids change;
it never holds CAP_SYS_CHROOT, so it cannot leave. Dangerous commands run on the real root.

A view is reused while each of its write roots still names the inode it was bound from
(a stat each), as Landlock rulesets are; a root that appears, disappears or is replaced
gets a new view (the old one is detached, so commands still inside keep theirs).
"""

import ctypes
import errno
import os
import threading
from typing import Dict, List, Optional, Tuple

from . import syscalls
from .landlock import Confine, write_paths

BASE = "/run/caisson/views"
_EMPTY = BASE + "/.empty"
MS_RDONLY = 1
MS_BIND = 4096
MNT_DETACH = 2

_lock = threading.Lock()
_views: Dict[Tuple[str, Tuple[str, ...]], Tuple[str, Tuple[Optional[Tuple[int, int]], ...]]] = {}
_made = 0
_usable: Optional[bool] = None


def _mount(source: str, target: str, fstype: Optional[str], flags: int, data: Optional[str] = None) -> None:
    libc = syscalls._libc
    if libc is None:
        raise OSError(38, "no libc")
    args = (
        os.fsencode(source),
        os.fsencode(target),
        None if fstype is None else fstype.encode(),
        ctypes.c_ulong(flags),
        None if data is None else os.fsencode(data),
    )
    if libc.mount(*args) != 0:
        err = ctypes.get_errno()
        raise OSError(err, "mount %s on %s: %s" % (source, target, os.strerror(err)))


def _read_only(source: str, target: str) -> None:
    # An overlay needs two lower layers to have none above; the empty one adds nothing.
    _mount("overlay", target, "overlay", MS_RDONLY, "lowerdir=%s:%s" % (source.replace(":", "\\:"), _EMPTY))


def _mounts() -> List[Tuple[str, str]]:
    """The container's mount points other than / and the views', parents first: (path, fs)."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            point = fields[4].encode().decode("unicode_escape")
            fstype = fields[fields.index("-") + 1]
            if point != "/" and not (point + "/").startswith(BASE + "/") and point != BASE:
                found.append((point, fstype))
    return sorted(set(found), key=lambda m: m[0].count("/"))


def usable() -> bool:
    """Whether views can be made here (root, CAP_SYS_ADMIN, overlays): tried once, by
    making the safe view."""
    global _usable
    if _usable is None:
        try:
            os.makedirs(_EMPTY, mode=0o700, exist_ok=True)
            os.chmod(os.path.dirname(BASE), 0o700)
            view_for(Confine("safe", (), False))
            _usable = True
        except OSError:
            _usable = False
    return _usable


def _named(roots: Tuple[str, ...]) -> Tuple[Optional[Tuple[int, int]], ...]:
    named: List[Optional[Tuple[int, int]]] = []
    for root in roots:
        try:
            st = os.stat(root)
        except OSError:
            named.append(None)
        else:
            named.append((st.st_dev, st.st_ino) if os.path.isdir(root) else None)
    return tuple(named)


def _build(path: str, roots: Tuple[str, ...]) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    _read_only("/", path)
    for point, fstype in _mounts():
        target = path + point
        if fstype == "proc":
            _mount("proc", target, "proc", 0)
        elif point in ("/dev", "/sys", "/dev/pts") or not os.path.isdir(point):
            _mount(point, target, None, MS_BIND)  # devices, sysfs (read-only), bound files
        else:
            _read_only(point, target)
    for root in sorted(roots, key=lambda r: r.count("/")):
        # Files too, as Landlock grants them (an entry of the home may be one).
        if os.path.exists(root) and not os.path.islink(root):
            try:
                _mount(root, path + root, None, MS_BIND)
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ENOTDIR):  # gone since listed: nothing to allow
                    raise


def view_for(confine: Confine) -> Optional[str]:
    """The view a command confined to ``confine`` runs in; None for dangerous (the real root)."""
    global _made
    if confine.level == "dangerous":
        return None
    roots = tuple(sorted(set(write_paths(confine))))
    key = (confine.level, roots)
    named = _named(roots)
    with _lock:
        hit = _views.get(key)
        if hit is not None and hit[1] == named:
            return hit[0]
        _made += 1
        path = "%s/%d" % (BASE, _made)
        _build(path, roots)
        _views[key] = (path, named)
    if hit is not None and syscalls._libc is not None:
        syscalls._libc.umount2(os.fsencode(hit[0]), MNT_DETACH)
    return path
