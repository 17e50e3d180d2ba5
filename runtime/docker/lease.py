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
from concurrent.futures import Future, ThreadPoolExecutor

import docker

from caisson.docker import containers
from caisson.docker.periodic import Periodic
from caisson.logs import get_logger

log = get_logger("caisson.lease")

# Renewals per grace period: one lost or late renewal must not end a session.
RENEWALS_PER_GRACE = 4
TICK = 1.0
# Renewals at once: each is an engine call that takes up to seconds on a loaded host, so one
# after another, 50 sessions' renewals outlasted their 60 s grace and idle sessions ended.
RENEWERS = 8


class LeaseKeeper(Periodic):
    def __init__(
        self,
        client: docker.DockerClient,
        leased: Callable[[], dict[str, tuple[float, bool]]],
        pid_of: Callable[[str], int] = lambda _: 0,
    ) -> None:
        """``leased()`` gives the containers to keep alive, each with its grace in seconds and
        whether it runs under gVisor; ``pid_of`` a container's daemon's host pid where the host
        reaches its root (renewed there without the engine), else 0."""
        super().__init__("caisson-lease", TICK)
        self._client = client
        self._leased = leased
        self._pid_of = pid_of
        self._renewed: dict[str, float] = {}
        # Renewals under way, by container: a tick never waits for one, so a renewal the engine
        # holds up (a wedged container's exec waits out the client's 60 s timeout) delays only
        # its own session's lease, not every other session's.
        self._started: dict[str, tuple[float, Future[bool]]] = {}
        self._workers = ThreadPoolExecutor(max_workers=RENEWERS, thread_name_prefix="caisson-lease")

    def stop(self) -> None:
        super().stop()
        # Renewals under way end by themselves (each engine call has the client's timeout).
        self._workers.shutdown(wait=False, cancel_futures=True)

    def tick(self) -> None:
        now = time.monotonic()
        for container_id, (started, future) in list(self._started.items()):
            if future.done():
                del self._started[container_id]
                if future.result():
                    self._renewed[container_id] = started
        leased = self._leased()
        due = sorted(
            (
                c for c, (grace, _) in leased.items()
                if c not in self._started and now - self._renewed.get(c, 0.0) >= grace / RENEWALS_PER_GRACE
            ),
            key=lambda c: self._renewed.get(c, 0.0),  # the most overdue first
        )
        for container_id in due:
            gvisor = leased[container_id][1]
            self._started[container_id] = (now, self._workers.submit(self._renew, container_id, gvisor=gvisor))
        for gone in set(self._renewed) - set(leased):
            del self._renewed[gone]

    def _renew(self, container_id: str, *, gvisor: bool) -> bool:
        try:
            containers.renew_lease(self._client, container_id, gvisor=gvisor, pid=self._pid_of(container_id))
        except Exception as exc:  # an engine hiccup: the next tick tries again
            log.warning("could not renew a session's lease", container=container_id[:12], error=str(exc))
            return False
        return True
