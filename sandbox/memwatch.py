"""Memory exhaustion under gVisor: the agent's work is killed, never the session.

On runc the kernel's OOM killer picks the agent's processes first (their oom_score_adj is
1000). gVisor has no OOM killer of its own: its memory is the sandbox's, and when the
agent's processes fill the container's limit the host kills gVisor's kernel, and so the
whole session (3 of 3 before this watch). gVisor's /proc/meminfo does show the container's
limit and what is free, so the daemon watches it there: when less than ``RESERVE_SHARE``
of the limit is left (room for gVisor's own memory, which the host also counts), it kills
the command whose process holds the most memory, whole tree, and says so on that
command's stderr. Only where the daemon forks its clones itself (gVisor's lack of
CLONE_PARENT marks it: ``Spawner.marks``).
"""

import contextlib
import logging
import os
import signal
import threading
import time
from typing import TYPE_CHECKING, Dict, Optional, Tuple

if TYPE_CHECKING:
    from .proctable import ProcessTable

log = logging.getLogger("caisson.memwatch")

INTERVAL = 0.005
RESERVE_SHARE = 0.3
RESERVE_MIN = 64 << 20
SMALL_SHARE = 16  # a process holding less than this share of the limit is never the one killed
SETTLE = 2.0
NOTE = b"\ncaisson: killed: the session ran out of memory (limits.memory); use less at once or raise the limit\n"


def meminfo() -> Tuple[int, int]:
    """(total, available) in bytes, from /proc/meminfo."""
    fields: Dict[str, int] = {}
    with open("/proc/meminfo", "rb") as f:
        for line in f:
            name, _, rest = line.partition(b":")
            if name in (b"MemTotal", b"MemAvailable"):
                fields[name.decode()] = int(rest.split()[0]) * 1024
    return fields["MemTotal"], fields["MemAvailable"]


def _largest(least_kib: int) -> Optional[Tuple[int, Tuple[int, ...]]]:
    """The process not root's holding the most memory, if it holds ``least_kib``: its pid and
    groups."""
    best: Optional[Tuple[int, int, Tuple[int, ...]]] = None
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        rss, uid, groups = 0, 0, ()  # type: Tuple[int, int, Tuple[int, ...]]
        try:
            with open("/proc/%s/status" % name, "rb") as f:
                for line in f:
                    if line.startswith(b"Uid:"):
                        uid = int(line.split()[1])
                    elif line.startswith(b"Groups:"):
                        groups = tuple(int(g) for g in line.split()[1:])
                    elif line.startswith(b"VmRSS:"):
                        rss = int(line.split()[1])
        except (OSError, ValueError):
            continue  # gone meanwhile
        if uid != 0 and rss >= least_kib and (best is None or rss > best[0]):
            best = (rss, int(name), groups)
    return None if best is None else (best[1], best[2])


def _relieve(table: "ProcessTable", total: int) -> None:
    # A small process is not what filled the memory (gVisor may be slow to give back what a
    # killed one held): leave it alone.
    found = _largest(total // SMALL_SHARE // 1024)
    if found is None:
        return
    pid, groups = found
    proc = next((p for p in list(table.live.values()) if p.marker is not None and p.marker in groups), None)
    if proc is None:
        log.warning("out of memory: killing pid %d (no command of ours)", pid)
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        return
    log.warning("out of memory: killing the tree of pid %d (%s)", proc.pid, proc.spec.display[:80])
    with proc.cond:
        proc.err.feed(NOTE)
        proc.out_of_memory = True
        proc.cond.notify_all()
    table.signal(proc, signal.SIGKILL, tree=True)
    # Until it is gone its memory still counts: wait, rather than kill a second command for it.
    with proc.cond:
        proc.cond.wait_for(lambda: proc.finished, timeout=SETTLE)


def watch(table: "ProcessTable") -> None:
    while True:
        if not table.spawner.marks:  # not (yet) found to run under gVisor
            time.sleep(INTERVAL)
            continue
        try:
            total, available = meminfo()
        except (OSError, KeyError, ValueError):
            return  # no meminfo to go by
        if available < max(RESERVE_MIN, int(total * RESERVE_SHARE)):
            _relieve(table, total)
        time.sleep(INTERVAL)


def start(table: "ProcessTable") -> None:
    threading.Thread(target=watch, args=(table,), name="memwatch", daemon=True).start()
