"""A controller's sign of life to its sessions' daemons.

A thread (not a task: it must not depend on the embedding program's event loop, and must
die with the process) renews each session's lease a few times per grace period. When the
controller dies, even by SIGKILL, the renewals stop and each daemon ends its session a grace
later: nothing leaks for long, and no reaper has to run. A controller that re-attaches
within the grace takes over the renewals.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import docker

from caisson.docker import containers
from caisson.docker.periodic import Periodic
from caisson.logs import get_logger

log = get_logger("caisson.lease")

# Renewals per grace period: one lost or late renewal must not end a session.
RENEWALS_PER_GRACE = 4
TICK = 1.0


class LeaseKeeper(Periodic):
    def __init__(self, client: docker.DockerClient, leased: Callable[[], dict[str, tuple[float, bool]]]) -> None:
        """``leased()`` gives the containers to keep alive, each with its grace in seconds and
        whether it runs under gVisor."""
        super().__init__("caisson-lease", TICK)
        self._client = client
        self._leased = leased
        self._renewed: dict[str, float] = {}

    def tick(self) -> None:
        now = time.monotonic()
        leased = self._leased()
        for container_id, (grace, gvisor) in leased.items():
            if now - self._renewed.get(container_id, 0.0) < grace / RENEWALS_PER_GRACE:
                continue
            try:
                containers.renew_lease(self._client, container_id, gvisor=gvisor)
            except Exception as exc:  # an engine hiccup: the next tick tries again
                log.warning("could not renew a session's lease", container=container_id[:12], error=str(exc))
                continue
            self._renewed[container_id] = now
        for gone in set(self._renewed) - set(leased):
            del self._renewed[gone]
