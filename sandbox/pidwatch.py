"""Process exhaustion under gVisor: a fork bomb is killed, never the session.

Under gVisor's ptrace platform every process of the session costs the host a stub process
whose threads grow with the sentry's (measured here: 10 host threads per sleeping process,
35–55 per busy one, kept after the processes end), and Docker's pids limit counts those
host threads. A fork bomb reached the container's limit within a second and the sandbox
died when the host refused it a thread. So the host gives a gVisor session more host
threads (``GVISOR_HOST_PIDS``) and far fewer processes (``CAISSON_PROCESSES``, the
daemon's ``limits.PROCESSES``), which the daemon enforces three ways. What it counts is what
gVisor's RLIMIT_NPROC counts: the tasks (processes and their threads, zombies until reaped)
of users other than root; the daemon's own processes and clones waiting for a command are root's.

* each clone it forks for a command of a user other than root sets RLIMIT_NPROC to the
  limit before its ids change: gVisor honours it at fork and clone (per user, threads
  included), refusing a new task only once the user holds *more* than the limit, so the
  agent's forks and threads stop at one past it (EAGAIN);
* a command is refused (``process_limit``) while the agent holds the limit, since gVisor
  checks it at neither setuid nor execve;
* this watch, finding the agent past its limit (that one task more), kills the command
  whose tasks are the most (its whole marker group: a bash fork bomb's processes outlive
  the call that started them; a thread bomb is one process of many threads) and says so on
  its stderr, so the agent holds exactly the limit and never more for long; it also kills
  any process that escaped an earlier kill of its group (``proctree.kill_escapes``).
"""

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Dict, FrozenSet, Set, Tuple

from . import proctree, reclaim
from .errors import DaemonError
from .limits import PROCESSES
from .spawner import MARKER_BASE, Spawner

if TYPE_CHECKING:
    from .proctable import ProcessTable

log = logging.getLogger("caisson.pidwatch")

# The limit holds by itself (RLIMIT_NPROC): the watch only has to free it soon, and a
# look at every process's status costs well under a millisecond for an idle session.
INTERVAL = 0.1
# A refusal holds while the same processes run, for this long: commands asked for at the
# limit one after another are refused without a read of every process's status each (with
# 42 busy tasks under load, those reads doubled a refusal's time). Any process gone or new
# makes the next command look again.
REFUSAL_KEPT = 2.0
_refused: Tuple[float, FrozenSet[str]] = (0.0, frozenset())
NOTE = (
    b"\ncaisson: killed: process limit reached (%d processes and threads in a gVisor session, from "
    b"limits.pids); run fewer at once\n" % PROCESSES
)


def count() -> Tuple[int, Dict[int, Tuple[int, int]], Set[int]]:
    """The agent's tasks; per marker group its tasks and one of its pids; the groups with a
    process that is not a zombie."""
    total = 0
    members: Dict[int, Tuple[int, int]] = {}
    running: Set[int] = set()
    for st in proctree.statuses():
        if st.uid == 0:
            continue
        # A zombie counts until reaped (gVisor's limit counts it: a bash bomb's unreaped
        # children held the limit unseen when they were left out).
        tasks = 1 if st.zombie else st.threads
        total += tasks
        for group in st.groups:
            if group >= MARKER_BASE:
                members[group] = (members.get(group, (0, 0))[0] + tasks, st.pid)
                if not st.zombie:
                    running.add(group)
    return total, members, running


def check(spawner: Spawner) -> None:
    """Refuse a command while the agent holds its limit (only where the daemon makes the
    clones, i.e. under gVisor): the command's own process would be one more. The caller
    holds the spawn lock."""
    global _refused
    if not (spawner.marks and PROCESSES):
        return
    listed = frozenset(os.listdir("/proc"))
    at, seen = _refused
    if listed != seen or time.monotonic() - at > REFUSAL_KEPT:
        if count()[0] < PROCESSES:
            return
        _refused = (time.monotonic(), listed)
    raise DaemonError(
        "process_limit",
        "process limit reached: the session already runs %d processes and threads (limits.pids under "
        "gVisor); end some (task_kill) or wait for them" % PROCESSES,
    )


def watch(table: "ProcessTable") -> None:
    while True:
        time.sleep(INTERVAL)
        looked = time.monotonic()
        agent, groups, running = count()
        proctree.kill_escapes(running, looked, table.spawn_lock)
        if agent > PROCESSES and groups:
            marker = max(groups, key=lambda g: groups[g][0])
            reclaim.end(table, marker, groups[marker][1], "process_limit", NOTE)


def start(table: "ProcessTable") -> None:
    """Once the daemon is found to run under gVisor."""
    if PROCESSES:
        threading.Thread(target=watch, args=(table,), name="pidwatch", daemon=True).start()
