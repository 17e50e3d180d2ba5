"""The host's own disk quota, for engines that cannot bound a container's disk.

Where the engine has no XFS project quotas, ``limits.disk`` would bind nothing and one
session could fill the host. Then a thread (like the lease keeper: independent of the
embedding program's event loop) asks the engine every second how much each of this
controller's sessions has written to its writable layer, and ends a session that went over
its quota, saying why. It is a soft bound: a session may overshoot by what it writes in
about a second before it is stopped. Hard quotas need a btrfs or XFS-pquota data-root (`caisson doctor`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import docker

from caisson.docker.containers import LABEL_OWNER, engine_errors
from caisson.docker.periodic import Periodic
from caisson.logs import get_logger

log = get_logger("caisson.disk")

PERIOD = 1.0


class DiskWatch(Periodic):
    def __init__(self, client: docker.DockerClient, owner: str, watched: Callable[[], dict[str, int]]) -> None:
        """``watched()`` gives the containers to bound, each with its quota in bytes."""
        super().__init__("caisson-disk", PERIOD)
        self._client = client
        self._owner = owner
        self._watched = watched
        # Why a container was ended, for the error its session's callers get.
        self.reasons: dict[str, str] = {}

    def tick(self) -> None:
        try:
            self.check()
        except Exception as exc:  # an engine hiccup: the next period tries again
            log.warning("could not measure sessions' disk use", error=str(exc))

    def check(self) -> None:
        quotas = self._watched()
        if not quotas:
            return
        with engine_errors("measuring sessions' disk use"):
            # One call for all of this controller's containers; the engine sizes each writable layer.
            rows = self._client.api.containers(filters={"label": f"{LABEL_OWNER}={self._owner}"}, size=True)
        for row in rows:
            container_id = str(row["Id"])
            quota, used = quotas.get(container_id), int(row.get("SizeRw") or 0)
            if quota is None or used <= quota or container_id in self.reasons:
                continue
            self.reasons[container_id] = (
                f"the session wrote {used / 2**20:.0f} MiB, over its disk quota of {quota / 2**20:.0f} MiB "
                "(limits.disk), so it was ended: this engine cannot bound a container's disk itself, and the "
                "host stops a session that goes over (`caisson doctor` says how to get hard quotas)"
            )
            log.warning("session over its disk quota: ending it", container=container_id[:12], used=used, quota=quota)
            with contextlib.suppress(docker.errors.APIError):  # already gone
                self._client.api.kill(container_id)
