"""The host's threads, shared by the gVisor sessions of a local engine.

A gVisor session may hold ``GVISOR_HOST_PIDS`` × ``limits.pids`` host threads (see
``containers``), and every thread of the host counts against the kernel's ``pid_max`` and
``threads-max``: a handful of sessions at their limits could leave the host, and every tenant
on it, unable to start a process. So a new gVisor session is refused while the limits of the
engine's live gVisor sessions (read from their labels) and its own would pass a share of
those. A remote engine's kernel cannot be read from here: there nothing is refused.
"""

from __future__ import annotations

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
