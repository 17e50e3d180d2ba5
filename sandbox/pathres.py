"""Race-free path resolution, optionally confined beneath allowed root directories.

A ``Resolver`` opens paths and returns descriptors; every later step of an op works
on those descriptors (``dir_fd``, ``fstat``, ``renameat``, ``unlinkat``), so nothing
re-resolves a name an agent may have swapped meanwhile.

With roots, a path must lie lexically beneath one of them, and what it resolves to
must stay beneath it too. That is checked on the descriptor actually opened:
``openat2(root_fd, rel, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)``. Where the kernel
has no openat2 (e.g. gVisor), or refused (an absolute symlink, ``..`` above the
root, a magic link), a component-by-component walk with ``O_NOFOLLOW`` opens
resolves symbolic links itself and refuses any that leave the root; an absolute
link that stays inside is followed. Without roots the kernel resolves (as the
thread's credentials allow), except the final symlinks of paths written, which are
followed here, one link at a time, from the directory descriptor already open.

``decided`` binds a path to where the host's policy found it: the real paths it looked at
(what the path resolves to and, for a link, the link itself). A path whose descriptor the
kernel names otherwise, because someone swapped a link on its way since, is refused
(``conflict``) before anything is done with it.
"""

import errno
import os
import stat
from collections import deque
from typing import Deque, Dict, List, Optional, Tuple

from . import syscalls
from .errors import DaemonError

O_PATH = getattr(os, "O_PATH", 0o10000000)
MAX_LINKS = 40
_DIR = O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
_openat2_works = syscalls.syscall is not None


class Outside(DaemonError):
    def __init__(self, path: str) -> None:
        super().__init__("permission_denied", "%s resolves outside the allowed roots" % path)


def fd_path(fd: int) -> str:
    """The kernel's name for an open descriptor (its canonical path)."""
    return os.readlink("/proc/self/fd/%d" % fd)


def entry_path(dirfd: int, name: str) -> str:
    """``name`` (one entry, or a link's relative target) joined to the real path of the open
    directory ``dirfd``."""
    return fd_path(dirfd).rstrip("/") + "/" + name


def _beneath(path: str, root: str) -> Optional[str]:
    """``path`` relative to ``root`` when it is lexically beneath it (or is it), else None."""
    if root == "/":
        return path.lstrip("/")
    if path == root:
        return ""
    if path.startswith(root + "/"):
        return path[len(root) + 1 :]
    return None


def parse_roots(value: object) -> Optional[List[str]]:
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise DaemonError("bad_request", "roots must be a non-empty list of absolute directories")
    roots = []
    for root in value:
        if not isinstance(root, str) or not root.startswith("/") or "\0" in root:
            raise DaemonError("bad_request", "roots must be absolute paths, got %r" % (root,))
        roots.append(os.path.normpath(root) if root != "/" else "/")
    return roots


class _Root:
    __slots__ = ("names", "fd")

    def __init__(self, name: str) -> None:
        # The root itself is the host's choice: the kernel resolves it.
        self.fd = os.open(name, _DIR)
        self.names = [name]
        real = fd_path(self.fd)
        if real != name:
            self.names.append(real)  # so canonical paths (fd_path) map back beneath it


def parse_decided(value: object) -> Dict[str, Tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(real, list) and real and all(isinstance(r, str) and r.startswith("/") for r in real)
        for real in value.values()
    ):
        raise DaemonError("bad_request", "decided must map each path to a non-empty list of absolute paths")
    return {path: tuple(real) for path, real in value.items()}


class Resolver:
    """Resolves the paths of one request; ``close()`` releases its root descriptors."""

    def __init__(self, roots: Optional[List[str]], decided: Optional[Dict[str, Tuple[str, ...]]] = None) -> None:
        self.roots = roots
        self.decided = decided or {}
        self._open: Dict[str, _Root] = {}

    def _as_decided(self, path: str, reached: str, fd: int) -> None:
        """Refuse (closing ``fd``) a decided path that now reaches another entry than the policy saw."""
        real = self.decided.get(path)
        if real is not None and reached not in real:
            os.close(fd)
            raise DaemonError(
                "conflict", "%s changed while the call ran: it now leads to %s, not to %s as when it was "
                "allowed; nothing was done" % (path, reached, " or ".join(real))
            )

    def close(self) -> None:
        for root in self._open.values():
            os.close(root.fd)
        self._open.clear()

    def _candidates(self, path: str) -> List[Tuple[_Root, str]]:
        found = []
        for name in self.roots or ():
            try:
                root = self._open.get(name)
                if root is None:
                    root = self._open[name] = _Root(name)
            except OSError:
                continue  # a root that does not exist holds nothing
            for alias in root.names:
                rel = _beneath(path, alias)
                if rel is not None:
                    found.append((root, rel))
                    break
        found.sort(key=lambda item: len(item[1]))  # the nearest root first
        if not found:
            raise Outside(path)
        return found

    # ------------------------------------------------------------ opening

    def open(self, path: str, flags: int, mode: int = 0o666) -> int:
        """Open ``path`` (symlinks followed unless ``O_NOFOLLOW``: then the last one is opened
        itself with ``O_PATH``, or refused with ELOOP otherwise)."""
        flags |= os.O_CLOEXEC
        fd = os.open(path, flags, mode) if self.roots is None else self._open_in_roots(path, flags, mode)
        if self.decided:
            self._as_decided(path, fd_path(fd), fd)
        return fd

    def _open_in_roots(self, path: str, flags: int, mode: int) -> int:
        for root, rel in self._candidates(path):
            try:
                return _open_beneath(root, rel, flags, mode)
            except Outside:
                continue
        raise Outside(path)

    def parent(self, path: str, follow: bool) -> Tuple[int, str]:
        """The directory holding ``path``'s last component, open, and that component's name.

        With ``follow``, a last component that is a symbolic link is replaced by what it
        points to, until it is none (or missing). The caller closes the descriptor.
        """
        dirfd, name = self._parent(path, follow)
        if self.decided:
            self._as_decided(path, entry_path(dirfd, name), dirfd)
        return dirfd, name

    def _parent(self, path: str, follow: bool) -> Tuple[int, str]:
        for _ in range(MAX_LINKS + 1):
            head, name = os.path.split(path.rstrip("/") or "/")
            if name in ("", ".", ".."):
                raise DaemonError("bad_request", "%s does not name a directory entry" % path)
            dirfd = self.open(head, _DIR)
            if not follow:
                return dirfd, name
            try:
                st = os.stat(name, dir_fd=dirfd, follow_symlinks=False)
                if not stat.S_ISLNK(st.st_mode):
                    return dirfd, name
                target = os.readlink(name, dir_fd=dirfd)
                path = target if target.startswith("/") else entry_path(dirfd, target)
            except FileNotFoundError:
                return dirfd, name  # to be created
            except BaseException:
                os.close(dirfd)
                raise
            os.close(dirfd)
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)


def _open_beneath(root: _Root, rel: str, flags: int, mode: int) -> int:
    global _openat2_works
    if not rel:
        return os.open(".", flags, mode, dir_fd=root.fd)
    if _openat2_works:
        try:
            return syscalls.openat2(
                root.fd, rel, flags, mode, syscalls.RESOLVE_BENEATH | syscalls.RESOLVE_NO_MAGICLINKS
            )
        except OSError as exc:
            if exc.errno == errno.ENOSYS:
                _openat2_works = False
            elif exc.errno not in (errno.EXDEV, errno.ELOOP, errno.EAGAIN):
                exc.filename = root.names[0].rstrip("/") + "/" + rel
                raise
            # EXDEV: an absolute link or ``..`` above the root; ELOOP: a magic link or a
            # loop. The walk decides which it is, and follows links that stay inside.
    return _walk(root, rel, flags, mode)


def _walk(root: _Root, rel: str, flags: int, mode: int) -> int:
    """Resolve ``rel`` below ``root`` one component at a time, never letting the kernel
    follow a symbolic link; links are read and resolved here, and must stay beneath."""
    follow_last = not flags & os.O_NOFOLLOW
    stack: List[int] = [root.fd]  # stack[0] is the root's (not ours to close)
    todo: Deque[str] = deque(rel.split("/"))
    links = 0
    try:
        while True:
            while todo and todo[0] in ("", "."):
                todo.popleft()
            if not todo:
                return os.open(".", flags, mode, dir_fd=stack[-1])
            comp = todo.popleft()
            if comp == "..":
                if len(stack) == 1:
                    raise Outside(root.names[0].rstrip("/") + "/" + rel)
                os.close(stack.pop())
                continue
            last = all(c in ("", ".") for c in todo)
            cur = stack[-1]
            link = False
            if last:
                try:
                    fd = os.open(comp, flags | os.O_NOFOLLOW, mode, dir_fd=cur)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not follow_last:
                        raise
                    if not stat.S_ISLNK(os.stat(comp, dir_fd=cur, follow_symlinks=False).st_mode):
                        raise
                    link = True
                else:
                    if not (follow_last and flags & O_PATH and stat.S_ISLNK(os.fstat(fd).st_mode)):
                        return fd
                    os.close(fd)
                    link = True
            else:
                fd = os.open(comp, O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=cur)
                kind = stat.S_IFMT(os.fstat(fd).st_mode)
                if kind == stat.S_IFDIR:
                    stack.append(fd)
                    continue
                os.close(fd)
                if kind != stat.S_IFLNK:
                    raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), comp)
                link = True
            if link:
                links += 1
                if links > MAX_LINKS:
                    raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), rel)
                target = os.readlink(comp, dir_fd=cur)
                if target.startswith("/"):
                    inside = None
                    for alias in root.names:
                        inside = _beneath(target, alias)  # ``..`` in it is the walk's to judge
                        if inside is not None:
                            break
                    if inside is None:
                        raise Outside(root.names[0].rstrip("/") + "/" + rel)
                    while len(stack) > 1:
                        os.close(stack.pop())
                    todo.extendleft(reversed(inside.split("/")))
                else:
                    todo.extendleft(reversed(target.split("/")))
    finally:
        for fd in stack[1:]:
            os.close(fd)
