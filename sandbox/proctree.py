"""Process trees: who is whose descendant (from /proc), and signalling or killing a whole tree.

Every command is a child subreaper, so its detached descendants stay below it and
are found here. Where the kernel has no subreaper (gVisor), a command's processes carry a
marker group instead, and the tree is also every process in that group.
"""

import os
import signal
from typing import Dict, Iterator, List, NamedTuple, Optional, Set


def children_map() -> Dict[int, List[int]]:
    """ppid -> pids, from /proc/<pid>/stat."""
    kids: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            fd = os.open("/proc/%s/stat" % name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # exited meanwhile
        try:
            data = os.read(fd, 1024)
        except OSError:
            continue
        finally:
            os.close(fd)
        # "pid (comm) state ppid ...": comm may contain spaces and parentheses.
        try:
            ppid = int(data[data.rindex(b")") + 2 :].split(None, 2)[1])
        except (ValueError, IndexError):
            continue
        kids.setdefault(ppid, []).append(int(name))
    return kids


class Status(NamedTuple):
    """What the watches and tree kills read of a process in /proc/<pid>/status."""

    pid: int
    zombie: bool
    uid: int  # real
    threads: int
    groups: List[int]


def _field(status: bytes, key: bytes) -> bytes:
    start = status.find(b"\n" + key + b":")
    if start < 0:
        return b""
    start += len(key) + 2
    return status[start : status.find(b"\n", start)]


def statuses() -> Iterator[Status]:
    """Every process of the (pid namespace's) /proc."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        # Three system calls a process (each costs far more under gVisor than on runc).
        try:
            fd = os.open("/proc/%s/status" % name, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue  # exited meanwhile
        try:
            status = b"\n" + os.read(fd, 8192)
        except OSError:
            continue
        finally:
            os.close(fd)
        try:
            yield Status(
                int(name),
                _field(status, b"State").split()[0] == b"Z",
                int(_field(status, b"Uid").split()[0]),
                int(_field(status, b"Threads") or b"1"),
                [int(g) for g in _field(status, b"Groups").split()],
            )
        except (ValueError, IndexError):
            continue  # cut short as it exited


def in_group(marker: Optional[int]) -> Set[int]:
    """Processes whose supplementary groups include ``marker``."""
    if marker is None:
        return set()
    return {st.pid for st in statuses() if marker in st.groups}


def _tree(root: int, include_root: bool, marker: Optional[int] = None) -> Set[int]:
    kids = children_map()
    found: Set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        for child in kids.get(pid, ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    if include_root:
        found.add(root)
    found |= in_group(marker)
    found.discard(os.getpid())
    return found


def send(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_tree(root: int, include_root: bool = True, marker: Optional[int] = None) -> int:
    """SIGSTOP the whole tree (rescanning until no new member appears), then SIGKILL it.

    Stopping first means a member that forks cannot leave children behind. The
    caller guarantees ``root`` is not yet reaped, so its pid cannot be reused.
    """
    stopped: Set[int] = set()
    for _ in range(1000):  # bounded: every round stops all members it found
        new = _tree(root, include_root, marker) - stopped
        if not new:
            break
        for pid in new:
            send(pid, signal.SIGSTOP)
        stopped |= new
    return sum(send(pid, signal.SIGKILL) for pid in stopped)


def signal_tree(root: int, sig: int, marker: Optional[int] = None) -> int:
    return sum(send(pid, sig) for pid in _tree(root, True, marker))
