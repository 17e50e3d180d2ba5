"""Files in a local container's root, reached by the host through ``/proc/<pid>/root``.

Only where the engine's processes are the host's (a local engine, runc) and the host may
look into them (root): ``reachable_pid`` says whether a started container qualifies. Each
component of a path is opened with ``O_NOFOLLOW`` and must stay on the container's root file
system, so nothing in the container, root there included, can point the host at a file of
its own choosing (a link, or a mount, where a component should be is refused).
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
from collections.abc import Iterator


def reachable_pid(pid: int, container_id: str) -> int:
    """``pid`` when the host can reach the container's root through it, else 0: the pid must
    be of this host's pid namespace (its cgroup names the container) and readable."""
    if pid <= 0:
        return 0
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8") as f:
            if container_id not in f.read():
                return 0
        os.close(os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY))
    except OSError:
        return 0
    return pid


@contextlib.contextmanager
def opened(pid: int, path: str) -> Iterator[int]:
    """An ``O_PATH`` descriptor of ``path`` (absolute, in the container of host process
    ``pid``), closed on leaving. OSError as the walk met it; EXDEV where it crosses a mount."""
    fds = [os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY)]
    try:
        device = os.fstat(fds[0]).st_dev
        parts = path.strip("/").split("/")
        for i, part in enumerate(parts):
            flags = os.O_PATH | os.O_NOFOLLOW | (os.O_DIRECTORY if i < len(parts) - 1 else 0)
            fds.append(os.open(part, flags, dir_fd=fds[-1]))
            if os.fstat(fds[-1]).st_dev != device:
                raise OSError(errno.EXDEV, f"the path crosses a mount at {part!r}")
        yield fds[-1]
    finally:
        for fd in fds:
            os.close(fd)


def date_file(pid: int, container_id: str, path: str, stamp: float) -> bool:
    """Set the times of the regular file ``path`` in the container to ``stamp``, making it
    (empty, root's) where it is missing, without the engine; False where that cannot be done
    safely here (the caller asks the engine)."""
    directory, name = posixpath.split(path)
    try:
        with opened(pid, directory) as parent:
            # Checked once the container's root is held: a pid reused since is not the container's.
            if not reachable_pid(pid, container_id):
                return False
            try:
                fd = os.open(name, os.O_PATH | os.O_NOFOLLOW, dir_fd=parent)
            except FileNotFoundError:
                fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=parent)
            try:
                found = os.fstat(fd)
                if not stat.S_ISREG(found.st_mode) or found.st_dev != os.fstat(parent).st_dev:
                    return False
                # The descriptor's own inode, whatever is at the path by now.
                os.utime(f"/proc/self/fd/{fd}", (stamp, stamp))
            finally:
                os.close(fd)
    except OSError:
        return False
    return True
