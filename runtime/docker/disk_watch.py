"""The host's own disk quota, for engines that cannot bound a container's disk.

Where the engine has no hard limit, ``limits.disk`` would bind nothing and one session could
fill the host. Then a thread (like the lease keeper: independent of the embedding program's
event loop) measures each of this controller's sessions every period and ends a session that
went over its quota, saying why. It is a soft bound: a session may overshoot by what it
writes in about a period before it is stopped (``fallocate`` reserves gigabytes in
milliseconds). Hard quotas need a btrfs or XFS-pquota data-root (`caisson doctor`).

Each session is measured on its own (``LayerSizes``): where the file system keeps a figure
per layer it is read in constant time, whatever the session holds. Where only the engine's
walk of a layer can tell, each session's walk runs in a small pool of workers with at most
one in flight per session, and the round goes on with the last figure it gave: a session
holding a huge tree delays its own next figure, not the others' checks.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import docker

from caisson.docker.layer_usage import LayerSizes
from caisson.docker.periodic import Periodic
from caisson.logs import get_logger

log = get_logger("caisson.disk")

# Half a second: reading a layer's figure costs microseconds, and each period is what a writer
# gains before it is stopped.
PERIOD = 0.5
# Engine walks at once (where there is no cheap figure): enough that a few heavy sessions do
# not hold up the rest, few enough not to load the engine.
ENGINE_WORKERS = 4


@dataclass(frozen=True)
class Round:
    """What one round of checks cost (for ``caisson bench``)."""

    sessions: int
    cpu_s: float  # this thread's CPU time for the round
    slowest_s: float  # the slowest single measurement the round used


class DiskWatch(Periodic):
    def __init__(
        self, client: docker.DockerClient, watched: Callable[[], dict[str, int]], *, figures: bool = True
    ) -> None:
        """``watched()`` gives the containers to bound, each with its quota in bytes;
        ``figures``: see ``LayerSizes``. Blocking: asks the engine where its layers live."""
        super().__init__("caisson-disk", PERIOD)
        self._client = client
        self._watched = watched
        self.sizes = LayerSizes(client, figures=figures)
        self._engine = ThreadPoolExecutor(ENGINE_WORKERS, thread_name_prefix="caisson-disk-size")
        # Where only the engine can tell: each session's walk in flight, and its last result.
        self._walks: dict[str, Future[tuple[int, float]]] = {}
        self._last: dict[str, tuple[int, float]] = {}
        # Why a container was ended, for the error its session's callers get, and the bytes it held then.
        self.reasons: dict[str, str] = {}
        self.ended: dict[str, int] = {}
        # The latest rounds' costs (about a minute), for the bench and the tests.
        self.rounds: deque[Round] = deque(maxlen=120)

    def stop(self) -> None:
        super().stop()
        self._engine.shutdown(wait=False, cancel_futures=True)

    def tick(self) -> None:
        try:
            self.rounds.append(self.check())
        except Exception as exc:  # an engine hiccup: the next period tries again
            log.warning("could not measure sessions' disk use", error=str(exc))

    def check(self) -> Round:
        cpu = time.thread_time()
        quotas = self._watched()
        slowest = 0.0
        for container_id, quota in quotas.items():
            if container_id in self.reasons:
                continue
            started = time.perf_counter()
            used = self.sizes.quick(container_id)
            took = time.perf_counter() - started
            if used is None:
                used, took = self._walked(container_id)
            slowest = max(slowest, took)
            if used is not None and used > quota:
                self._end(container_id, used, quota)
        for gone in (self._last.keys() | self._walks.keys()) - quotas.keys():
            self._last.pop(gone, None)
            self._walks.pop(gone, None)
        self.sizes.retain(quotas.keys())
        return Round(sessions=len(quotas), cpu_s=time.thread_time() - cpu, slowest_s=slowest)

    def _walked(self, container_id: str) -> tuple[int | None, float]:
        """The last figure the engine's walk gave (None before the first), starting the next
        walk unless one is still in flight."""
        walk = self._walks.get(container_id)
        if walk is not None and walk.done():
            with contextlib.suppress(Exception):  # an engine hiccup: this round keeps the old figure
                self._last[container_id] = walk.result()
            walk = None
        if walk is None:
            self._walks[container_id] = self._engine.submit(self._walk, container_id)
        last = self._last.get(container_id)
        return (None, 0.0) if last is None else last

    def _walk(self, container_id: str) -> tuple[int, float]:
        started = time.perf_counter()
        used = self.sizes.engine(container_id)
        return used, time.perf_counter() - started

    def _end(self, container_id: str, used: int, quota: int) -> None:
        self.ended[container_id] = used
        self.reasons[container_id] = (
            f"the session held {used / 2**20:.0f} MiB of disk, over its disk quota of {quota / 2**20:.0f} MiB "
            "(limits.disk), so it was ended: this engine cannot bound a container's disk itself, and the "
            "host stops a session that goes over (`caisson doctor` says how to get hard quotas)"
        )
        log.warning(
            "session over its disk quota: ending it", container=container_id[:12], used=used, quota=quota,
            measure=self.sizes.mechanism,
        )
        with contextlib.suppress(docker.errors.APIError):  # already gone
            self._client.api.kill(container_id)
