"""Memory exhaustion under gVisor: the agent's work is killed, never the session.

On runc the kernel's OOM killer picks the agent's processes first (their oom_score_adj is
1000). gVisor has no OOM killer of its own: its memory is the sandbox's, and when the
agent's processes fill the container's limit the host kills gVisor's kernel, and so the
whole session (3 of 3 before this watch). gVisor's /proc/meminfo does show the container's
limit and what is free, so the daemon watches it there: when less than ``RESERVE_SHARE``
of the limit is left (room for gVisor's own memory, which the host also counts), it kills
the command whose process holds the most memory, whole tree, and says so on that
command's stderr. Only where the daemon forks its clones itself (gVisor's lack of
CLONE_PARENT marks it: ``Spawner.marks``); the poll is adaptive (see INTERVAL).
"""

import os
import threading
import time
from typing import TYPE_CHECKING, Dict, Optional, Tuple

from . import reclaim
from .spawner import MARKER_BASE

if TYPE_CHECKING:
    from .proctable import ProcessTable

# The poll's period near the threshold (at 20 ms 2 of 5 runs of the hog tests lost a session),
# and far from it, when memory filling at RATE could not reach the threshold sooner. A read
# of gVisor's /proc/meminfo costs about 0.15 ms: every 5 ms it was 3 % of a core per idle
# session. The agent's processes filled memory at 0.8 GiB/s here (one or two at once).
INTERVAL = 0.005
SLOWEST = 0.1
RATE = 4 << 30
RESERVE_SHARE = 0.3
RESERVE_MIN = 64 << 20
SMALL_SHARE = 16  # a process holding less than this share of the limit is never the one killed
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
    marker = next((g for g in groups if g >= MARKER_BASE), None)
    reclaim.end(table, marker, pid, "out_of_memory", NOTE)


def watch(table: "ProcessTable") -> None:
    while True:
        try:
            total, available = meminfo()
        except (OSError, KeyError, ValueError):
            return  # no meminfo to go by
        reserve = max(RESERVE_MIN, int(total * RESERVE_SHARE))
        if available < reserve:
            _relieve(table, total)
        # Far from the threshold, look again no later than memory filling at RATE could reach it.
        time.sleep(min(SLOWEST, max(INTERVAL, (available - reserve) / RATE)))


def start(table: "ProcessTable") -> None:
    """Once the daemon is found to run under gVisor."""
    threading.Thread(target=watch, args=(table,), name="memwatch", daemon=True).start()
