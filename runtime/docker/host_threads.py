"""The host's threads, shared by the gVisor sessions of a local engine.

A gVisor session may hold ``GVISOR_HOST_PIDS`` × ``limits.pids`` host threads (see
``containers``), and every thread of the host counts against the kernel's ``pid_max`` and
``threads-max``: a handful of sessions at their limits could leave the host, and every tenant
on it, unable to start a process. So a new gVisor session is refused while the limits of the
engine's live gVisor sessions (read from their labels) and its own would pass a share of
those. A remote engine's kernel cannot be read from here: there nothing is refused.

Every controller on the host (each library ``Runtime``, each ``caisson serve`` replica) checks
and creates under one lock file of the host's, so two opening at once cannot both fit in the
room left for one.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import docker

from caisson.config import SessionConfig
from caisson.docker.containers import LABEL_HOST_THREADS, engine_errors, host_threads
from caisson.errors import HostLimit


def host_budget(share: float) -> int | None:
    """The host threads this host's gVisor sessions may hold together; None if unreadable."""
    try:
        most = min(int(Path("/proc/sys/kernel", name).read_text()) for name in ("pid_max", "threads-max"))
    except (OSError, ValueError):
        return None
    return int(most * share)


# Beside the host's other lock files (shared by every user and state directory); /tmp where
# that is not writable.
_LOCK_NAME = "caisson-host-threads.lock"


def _lock_path() -> Path:
    run_lock = Path("/run/lock")
    return (run_lock if os.access(run_lock, os.W_OK) else Path(tempfile.gettempdir())) / _LOCK_NAME


@contextlib.contextmanager
def admitting() -> Iterator[None]:
    """Held while a gVisor session's room is checked and its container made: one at a time on
    this host, whichever controller (process) opens it; a new open file each time, so the
    threads of one controller wait for each other too."""
    # Read-only: flock needs no write access, so controllers of other users share the file.
    fd = os.open(_lock_path(), os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released with the descriptor
        yield
    finally:
        os.close(fd)


def held(client: docker.DockerClient) -> tuple[int, int]:
    """The engine's live gVisor sessions, and the host threads they may hold together."""
    with engine_errors("listing sandbox containers"):
        rows = client.api.containers(all=True, filters={"label": LABEL_HOST_THREADS})
    live = [row for row in rows if row.get("State") not in ("exited", "dead")]
    return len(live), sum(int((row.get("Labels") or {}).get(LABEL_HOST_THREADS) or 0) for row in live)


def admit(client: docker.DockerClient, config: SessionConfig, budget: int) -> None:
    """Refuse a gVisor session whose host threads would pass ``budget`` with the others'."""
    sessions, threads = held(client)
    wanted = host_threads(config)
    if threads + wanted > budget:
        raise HostLimit(
            f"no room for this gVisor session's host threads: this engine's {sessions} live gVisor "
            f"sessions may hold {threads} host threads, and this one {wanted} more ({config.limits.pids} "
            f"limits.pids × 8), over the budget of {budget} (RuntimeConfig.gvisor_host_threads_share of the "
            f"host's kernel.pid_max or threads-max, the smaller); close gVisor sessions, open this one with a "
            f"lower limits.pids, or raise the share (or the host's kernel.pid_max)"
        )
