"""Process trees: who is whose descendant (from /proc), and signalling or killing a whole tree.

Every command is a child subreaper, so its detached descendants stay below it and
are found here. Where the kernel has no subreaper (gVisor), a command's processes carry a
marker group instead, and the tree is also every process in that group.
"""

import contextlib
import os
import signal
import threading
import time
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Set

# How long a kill waits for its group's members to be gone and kills those that escaped it
# (a gVisor fork loop's went within 2 s); what is left after, the process watch kills at a
# later look.
ESCAPE_DEADLINE = 5.0
# marker -> the pids of its group sent SIGKILL: a member not among them escaped the kill.
_killed: Dict[int, Set[int]] = {}
_escapes_lock = threading.Lock()


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
    stopped: bool


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
            state = _field(status, b"State").split()[0]
            yield Status(
                int(name),
                state == b"Z",
                int(_field(status, b"Uid").split()[0]),
                int(_field(status, b"Threads") or b"1"),
                [int(g) for g in _field(status, b"Groups").split()],
                state == b"T",
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
    killed = sum(send(pid, signal.SIGKILL) for pid in stopped)
    if marker is not None:
        with _escapes_lock:
            _killed.setdefault(marker, set()).update(stopped)
            killed += _kill_escaped(marker)
    return killed


def kill_escapes(running: Iterable[int]) -> None:
    """Kill the members of killed marker groups that escaped their kill (``running``: the
    groups that have a process that is not a zombie); the process watch calls it each look."""
    with _escapes_lock:
        for marker in _killed.keys() & set(running):
            _kill_escaped(marker)


def _kill_escaped(marker: int) -> int:
    """Kill the members of a killed group that were not sent SIGKILL, once those that were
    are gone; how many.

    Under gVisor a process forks after its SIGSTOP, and even its SIGKILL, for a while: a
    child of one made after the tree kill's last look was neither stopped nor killed and
    went on forking. Killed one pid at a time, a Python fork loop refilled its group as fast
    (40 processes at the limit, 5 s of rounds). So once the killed are gone, every process
    of the escaped ones' users is stopped at once, with one ``kill(-1)`` as that user (one
    pass in the kernel: no fork slips between two signals), the group is killed, and the
    users' other processes go on (but those the agent had stopped itself).
    """
    sent = _killed[marker]
    users: Set[int] = set()
    held: Set[int] = set()  # the users' processes that were stopped before: they stay so
    count = 0
    deadline = time.monotonic() + ESCAPE_DEADLINE
    try:
        while True:
            while any(_running(pid) for pid in sent) and time.monotonic() < deadline:
                time.sleep(0.005)
            new = [st for st in _group_left(marker) if st.pid not in sent]
            if not new or time.monotonic() >= deadline:
                break
            more = {st.uid for st in new if st.uid != 0} - users
            held |= {st.pid for st in statuses() if st.uid in more and st.stopped}
            users |= more
            for uid in users:
                signal_user(uid, signal.SIGSTOP)
            time.sleep(0.01)  # the stops land
            for st in _group_left(marker):
                if st.pid not in sent and send(st.pid, signal.SIGKILL):
                    sent.add(st.pid)
                    count += 1
    finally:
        # One by one: the escaped are gone, so no fork slips between two signals now.
        for st in statuses():
            if st.uid in users and st.pid not in held:
                send(st.pid, signal.SIGCONT)
    return count


def _running(pid: int) -> bool:
    """Whether ``pid`` is there and not a zombie (one read, not a look at every process)."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read(512)
    except OSError:
        return False
    end = data.rfind(b")")  # "pid (comm) state ...": comm may contain parentheses
    return end >= 0 and data[end + 2 : end + 3] not in (b"Z", b"X", b"")


def _group_left(marker: int) -> List[Status]:
    return [st for st in statuses() if marker in st.groups and not st.zombie and st.pid != os.getpid()]


def signal_user(uid: int, sig: int) -> None:
    """Send ``sig`` to every process of user ``uid`` (not root: that would be every process)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setuid(uid)
            os.kill(-1, sig)  # every process this user may signal, which is its own but this one
        finally:
            os._exit(0)
    with contextlib.suppress(ChildProcessError):  # the daemon's reaper took it first
        os.waitpid(pid, 0)


def signal_tree(root: int, sig: int, marker: Optional[int] = None) -> int:
    return sum(send(pid, sig) for pid in _tree(root, True, marker))
