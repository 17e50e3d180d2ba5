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
from typing import Dict, Iterable, Iterator, List, NamedTuple, Optional, Set, Tuple

# How long a kill waits for its group's members to be gone and kills those that escaped it
# (a gVisor fork loop's went within 2 s); what is left after, the process watch kills at a
# later look.
ESCAPE_DEADLINE = 5.0
# marker -> (when first killed, the pids of its group sent SIGKILL): a member not among them
# escaped the kill.
_killed: Dict[int, Tuple[float, Set[int]]] = {}
_escapes_lock = threading.Lock()


class Status(NamedTuple):
    """What the watches and tree kills read of a process in /proc/<pid>/status."""

    pid: int
    ppid: int
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
                int(_field(status, b"PPid")),
                state == b"Z",
                int(_field(status, b"Uid").split()[0]),
                int(_field(status, b"Threads") or b"1"),
                [int(g) for g in _field(status, b"Groups").split()],
                state == b"T",
            )
        except (ValueError, IndexError):
            continue  # cut short as it exited


class _Look(NamedTuple):
    """Who is whose child, and who is in which group, from one look at every process."""

    kids: Dict[int, List[int]]
    groups: Dict[int, List[int]]

    @classmethod
    def now(cls, groups: bool) -> "_Look":
        """``groups``: who is in which group too, from each process's status (several times
        the cost of the stat that gives the parent: runc's trees, without groups, keep that)."""
        look = cls({}, {})
        if groups:
            for st in statuses():
                look.kids.setdefault(st.ppid, []).append(st.pid)
                for group in st.groups:
                    look.groups.setdefault(group, []).append(st.pid)
            return look
        for name in os.listdir("/proc"):
            fields = _stat(name) if name.isdigit() else None
            if fields is not None:
                look.kids.setdefault(int(fields[1]), []).append(int(name))
        return look

    def tree(self, root: int, include_root: bool, marker: Optional[int]) -> Set[int]:
        found: Set[int] = set(self.groups.get(marker, ())) if marker is not None else set()
        todo = [root]
        while todo:
            for child in self.kids.get(todo.pop(), ()):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        if include_root:
            found.add(root)
        found.discard(os.getpid())
        return found


def send(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_tree(root: int, include_root: bool = True, marker: Optional[int] = None) -> int:
    return len(kill_trees([(root, marker)], include_root))


def kill_trees(roots: List[Tuple[int, Optional[int]]], include_root: bool = True) -> Set[int]:
    """SIGSTOP the whole trees of ``(root, marker)`` (looking again until no new member
    appears), then SIGKILL them; the pids killed.

    Stopping first means a member that forks cannot leave children behind. The caller holds
    the spawn lock and guarantees no root is reaped yet, so no root's pid can be reused; for
    each marker, it calls ``settle`` next, without that lock. Many trees at once share their
    looks (under gVisor beside busy work, one look at every process took 0.3-0.7 s).
    """
    stopped: Dict[int, Set[int]] = {root: set() for root, _ in roots}
    groups = any(marker is not None for _, marker in roots)
    for _ in range(1000):  # bounded: every round stops all members it found
        look = _Look.now(groups)
        grew = False
        for root, marker in roots:
            new = look.tree(root, include_root, marker) - stopped[root]
            for pid in new:
                send(pid, signal.SIGSTOP)
            stopped[root] |= new
            grew = grew or bool(new)
        if not grew:
            break
    killed = {pid for pid in set().union(*stopped.values()) if send(pid, signal.SIGKILL)}
    with _escapes_lock:
        for root, marker in roots:
            if marker is not None:
                _killed.setdefault(marker, (time.monotonic(), set()))[1].update(stopped[root])
    return killed


def settle(marker: Optional[int], lock: threading.Lock) -> int:
    """After ``kill_tree`` of a marker group: wait until the members it killed are gone, then
    kill those that escaped it (``_kill_escaped``); how many.

    Called without ``lock`` (the spawn lock): under gVisor a killed member takes up to a
    second to go, and many kills at once waited one after another while each held it. Only
    a group found with escaped members takes the lock (no pid reaped, so reused, while
    signalled) and the escapes lock (no two such kills interleave their stops and continues).
    """
    if marker is None:
        return 0
    with _escapes_lock:
        sent = _killed.get(marker, (0.0, set()))[1]
    deadline = time.monotonic() + ESCAPE_DEADLINE
    # A killed pid reaped meanwhile and taken by a new process only makes this wait longer.
    while any(_running(pid) for pid in _copy(sent)) and time.monotonic() < deadline:
        time.sleep(0.005)
    if not _escaped(marker, _copy(sent)):  # looked at without the locks: most kills have none
        return 0
    with lock, _escapes_lock:
        return _kill_escaped(marker, sent, deadline)


def kill_escapes(running: Iterable[int], looked: float, lock: threading.Lock) -> None:
    """Kill the members of killed marker groups that escaped their kill (``running``: the
    groups that had a process that is not a zombie at a look begun at ``looked``); the
    process watch calls it after each look. Groups left with none are forgotten."""
    running = set(running)
    with _escapes_lock:
        for marker, (at, _) in list(_killed.items()):
            if marker not in running and at < looked:
                del _killed[marker]  # all gone or zombies: none can fork again
        markers = _killed.keys() & running
    for marker in markers:
        settle(marker, lock)


def _kill_escaped(marker: int, sent: Set[int], deadline: float) -> int:
    """Kill the members of a killed group that were not sent SIGKILL, once those that were
    are gone; how many. The caller holds the spawn and escapes locks.

    Under gVisor a process forks after its SIGSTOP, and even its SIGKILL, for a while: a
    child of one made after the tree kill's last look was neither stopped nor killed and
    went on forking. Killed one pid at a time, a Python fork loop refilled its group as fast
    (40 processes at the limit, 5 s of rounds). So once the killed are gone, every process
    of the escaped ones' users is stopped at once, with one ``kill(-1)`` as that user (one
    pass in the kernel: no fork slips between two signals), the group is killed, and, once
    none is left, the users' other processes go on (but those the agent had stopped itself).
    """
    users: Set[int] = set()
    held: Set[int] = set()  # the users' processes that were stopped before: they stay so
    count = 0
    try:
        while True:
            while any(_running(pid) for pid in sent) and time.monotonic() < deadline:
                time.sleep(0.005)
            new = _escaped(marker, sent)
            if not new or time.monotonic() >= deadline:
                break
            more = {st.uid for st in new if st.uid != 0} - users
            held |= {st.pid for st in statuses() if st.uid in more and st.stopped}
            users |= more
            for uid in users:
                signal_user(uid, signal.SIGSTOP)
            time.sleep(0.01)  # the stops land
            for st in _escaped(marker, sent):
                if send(st.pid, signal.SIGKILL):
                    sent.add(st.pid)
                    count += 1
    finally:
        # One by one: the escaped are gone, so no fork slips between two signals now.
        for st in statuses():
            if st.uid in users and st.pid not in held:
                send(st.pid, signal.SIGCONT)
    return count


def _copy(sent: Set[int]) -> Set[int]:
    with _escapes_lock:  # another pass may add to them
        return set(sent)


def _running(pid: int) -> bool:
    """Whether ``pid`` is there and not a zombie (one read, not a look at every process)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in (b"Z", b"X")


def _stat(pid: object) -> Optional[List[bytes]]:
    """The fields of /proc/<pid>/stat after its name, ``[state, ppid, rest]``; None once gone."""
    try:
        fd = os.open("/proc/%s/stat" % pid, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None  # exited meanwhile
    try:
        data = os.read(fd, 1024)
    except OSError:
        return None
    finally:
        os.close(fd)
    end = data.rfind(b")")  # "pid (comm) state ppid ...": comm may contain spaces and parentheses
    fields = data[end + 2 :].split(None, 2) if end >= 0 else []
    return fields if len(fields) >= 2 and fields[1].isdigit() else None


def _escaped(marker: int, sent: Set[int]) -> List[Status]:
    """The group's members that live and were not sent SIGKILL (the caller holds the escapes
    lock, or gives a copy)."""
    return [st for st in statuses() if marker in st.groups and not st.zombie and st.pid not in sent and st.pid != os.getpid()]


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
    return sum(send(pid, sig) for pid in _Look.now(marker is not None).tree(root, True, marker))
