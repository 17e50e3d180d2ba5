"""Process trees: who is whose descendant (from /proc), and signalling or killing a whole tree.

Every command is a child subreaper, so its detached descendants stay below it and
are found here. Where the kernel has no subreaper (gVisor), a command's processes carry a
marker group instead, and the tree is also every process in that group.
"""

import os
import signal
from typing import Dict, Iterator, List, Optional, Set, Tuple


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


def groups() -> Iterator[Tuple[int, List[int]]]:
    """Every process with its supplementary groups."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/status" % name, "rb") as f:
                status = f.read()
        except OSError:
            continue  # exited meanwhile
        start = status.find(b"\nGroups:")
        if start >= 0:
            yield int(name), [int(g) for g in status[start + 8 : status.index(b"\n", start + 1)].split()]


def in_group(marker: Optional[int]) -> Set[int]:
    """Processes whose supplementary groups include ``marker``."""
    if marker is None:
        return set()
    return {pid for pid, held in groups() if marker in held}


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
