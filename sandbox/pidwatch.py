"""Process exhaustion under gVisor: a fork bomb is killed, never the session.

Under gVisor's ptrace platform every process of the session costs the host a stub process
whose threads grow with the sentry's (measured here: 10 host threads per sleeping process,
35–55 per busy one, kept after the processes end), and Docker's pids limit counts those
host threads. A fork bomb reached the container's limit within a second and the sandbox
died when the host refused it a thread. So the host gives a gVisor session more host
threads (``GVISOR_HOST_PIDS``) and far fewer processes (``CAISSON_PROCESSES``, the
daemon's ``limits.PROCESSES``), which the daemon enforces three ways:

* each clone it forks for a command of a user other than root sets RLIMIT_NPROC to the
  limit before its ids change: gVisor honours it at fork and clone (per user, threads
  included), so the agent's forks past it fail with EAGAIN;
* a command is refused (``process_limit``) while the session holds that many processes,
  since gVisor checks the limit at neither setuid nor execve;
* this watch, finding the agent at its limit, kills the command with the most processes
  (its whole marker group: a bash fork bomb's processes outlive the call that started
  them) and says so on its stderr, so the limit is not held for good.
"""

import logging
import os
import threading
import time
from typing import TYPE_CHECKING, Dict, Optional, Tuple

from . import proctree, reclaim
from .errors import DaemonError
from .limits import PROCESSES
from .spawner import MARKER_BASE, Spawner

if TYPE_CHECKING:
    from .proctable import ProcessTable

log = logging.getLogger("caisson.pidwatch")

# The limit holds by itself (RLIMIT_NPROC): the watch only has to free it soon, and a
# listing of /proc costs about 0.1 ms under gVisor.
INTERVAL = 0.1
# Processes in the session that are not the agent's (docker-init and the daemon).
OUTSIDE = 2
# Commands are refused this many processes short of the limit: the listing was seen one
# above the agent's processes now and then, and work merely started must not be killed.
SLACK = 1
NOTE = (
    b"\ncaisson: killed: process limit reached (%d processes in a gVisor session, from limits.pids); "
    b"run fewer processes at once\n" % PROCESSES
)


def _listed() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def agent_processes(spawner: Spawner) -> int:
    """The session's processes but docker-init, the daemon and clones waiting for a command
    (threads are not listed: they cost the host little)."""
    return _listed() - OUTSIDE - spawner.waiting


def check(spawner: Spawner) -> None:
    """Refuse a command while the session is at its process limit (only where the daemon
    makes the clones, i.e. under gVisor): the command's own process would be one more. The
    caller holds the spawn lock."""
    if spawner.marks and PROCESSES and agent_processes(spawner) + 1 + SLACK >= PROCESSES:
        raise DaemonError(
            "process_limit",
            "process limit reached: the session already runs %d processes (limits.pids under gVisor); "
            "end some (task_kill) or wait for them" % PROCESSES,
        )


def _crowded() -> Optional[Tuple[int, int]]:
    """The marker group with the most processes: (marker, one of its pids)."""
    members: Dict[int, Tuple[int, int]] = {}
    for pid, held in proctree.groups():
        for group in held:
            if group >= MARKER_BASE:
                n, _ = members.get(group, (0, 0))
                members[group] = (n + 1, pid)
    if not members:
        return None
    marker = max(members, key=lambda g: members[g][0])
    return marker, members[marker][1]


def watch(table: "ProcessTable") -> None:
    while True:
        time.sleep(INTERVAL)
        # The agent's own forks at their limit: commands are refused short of it (SLACK), so
        # work merely started up to the limit is never killed for it. Counted under the
        # spawn lock: a clone being made or handed a command is then counted rightly.
        with table.spawn_lock:
            agent = agent_processes(table.spawner)
        if agent < PROCESSES:
            continue
        found = _crowded()
        if found is not None:
            reclaim.end(table, found[0], found[1], "process_limit", NOTE)


def start(table: "ProcessTable") -> None:
    """Once the daemon is found to run under gVisor."""
    if PROCESSES:
        threading.Thread(target=watch, args=(table,), name="pidwatch", daemon=True).start()
