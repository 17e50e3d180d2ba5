"""Ending the agent's work that exhausts the session under gVisor (``memwatch``,
``pidwatch``): the command's whole tree is killed, its stderr says why, and its status
carries the reason, so the call that met the limit gets a clear error."""

import contextlib
import logging
import os
import signal
import time
from typing import TYPE_CHECKING, Optional

from .proctree import kill_tree, settle

if TYPE_CHECKING:
    from .proctable import ProcessTable

log = logging.getLogger("caisson.reclaim")

# Until a killed command is gone what it holds still counts: wait this long rather than
# kill a second command for it.
SETTLE = 2.0


def end(table: "ProcessTable", marker: Optional[int], pid: int, reason: str, note: bytes) -> None:
    """Kill the command whose processes carry ``marker`` (its tree, and its stderr gets
    ``note``); with no such command of ours, what is left of it (an orphaned marker group,
    or ``pid`` alone). ``reason``: the status key (``out_of_memory``, ``process_limit``)."""
    proc = next((p for p in list(table.live.values()) if marker is not None and p.marker == marker), None)
    if proc is None:
        log.warning("%s: killing %s (no running command of ours)", reason, "pid %d" % pid if marker is None else "group %d" % marker)
        with table.spawn_lock:
            if marker is not None:
                kill_tree(pid, marker=marker)
            else:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        settle(marker, table.spawn_lock)
        time.sleep(0.05)  # let gVisor give back what they held before the next look
        return
    log.warning("%s: killing the tree of pid %d (%s)", reason, proc.pid, proc.spec.display[:80])
    with proc.cond:
        proc.err.feed(note)
        proc.exhausted = reason
        proc.cond.notify_all()
    table.signal(proc, signal.SIGKILL, tree=True)
    with proc.cond:
        proc.cond.wait_for(lambda: proc.finished, timeout=SETTLE)
