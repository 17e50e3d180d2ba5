"""A controller's sign of life to its sessions' daemons.

A thread (not a task: it must not depend on the embedding program's event loop, and must
die with the process) renews each session's lease a few times per grace period. When the
controller dies, even by SIGKILL, the renewals stop and each daemon ends its session a grace
later: nothing leaks for long, and no reaper has to run. A controller that re-attaches
within the grace takes over the renewals.

A renewal dates a file only root in the container can write: on a local engine under runc
the host dates it itself, through the container's root; elsewhere the engine copies it in.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import docker

from caisson.docker import containers
from caisson.docker.periodic import Periodic
from caisson.logs import get_logger
from caisson.transport import container_root

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
            renew_lease(self._client, container_id, gvisor=gvisor, pid=self._pid_of(container_id))
        except Exception as exc:  # an engine hiccup: the next tick tries again
            log.warning("could not renew a session's lease", container=container_id[:12], error=str(exc))
            return False
        return True


def renew_lease(
    client: docker.DockerClient, container_id: str, *, gvisor: bool = False, until: float | None = None, pid: int = 0
) -> bool:
    """Tell a session's daemon its controller lives (a file only root in the container can
    write, dated now, or ``until`` to keep it past its grace); False when the container is gone.

    Where the host reaches the container's root through its daemon's host ``pid`` (a local
    engine, runc), the file is dated there, without the engine: an engine held up by its
    storage (btrfs' cleaner after many sessions were removed) held renewals past their grace.
    Elsewhere the engine copies the file in; gVisor does not see files the engine copies into
    a running container, and a session at its disk quota cannot take a new one, so there the
    file is dated from inside."""
    stamp = int(until if until is not None else time.time())
    if pid and container_root.date_file(pid, container_id, containers.LEASE_PATH, stamp):
        return True
    if not gvisor:
        try:
            with containers.engine_errors("renewing a session's lease"):
                directory, name = posixpath.split(containers.LEASE_PATH)
                return bool(client.api.put_archive(container_id, directory, containers.empty_file(name, mtime=stamp)))
        except docker.errors.NotFound:
            return False
        except docker.errors.APIError:
            pass  # a session at its disk quota cannot take a new file: date the old one instead
    # No new space needed (a full quota takes it); detached: the client awaits exec output with no timeout.
    try:
        with containers.engine_errors("renewing a session's lease"):
            touch = ["touch", "-d", f"@{stamp}", containers.LEASE_PATH]
            exec_id = client.api.exec_create(container_id, touch, user="0")["Id"]
            client.api.exec_start(exec_id, detach=True)
        return True
    except docker.errors.APIError:
        return False
