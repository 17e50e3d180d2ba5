"""A warm pool: started, hardened, idle containers of one configuration, ready to be taken.

A thread keeps ``size`` containers created and started, their daemons warm: each has answered
a ``ping``, which a daemon answers once what a first command would wait for is made (under
gVisor: the clone its command runs in, the read-only view of level safe). Where the session
will speak over the attach stream (gVisor, a remote engine), the pool keeps the stream that
ping went over, so taking a container costs no request to the engine. A session takes one
and binds it late: the daemon's stream, the policy, the profile and the
tenant are the session's. A pooled container is used by one session only and removed with
it, so nothing carries over. Pooled containers carry the usual labels (owner, expiry), so the
reaper treats them like any session's.

Only the fields that shape a container must match the pool's configuration; the rest
(tenant, profile, timeouts of calls, bash mode) are host-side and bind late.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import docker

from caisson.client.primitives import new_session_id
from caisson.config import SessionConfig
from caisson.docker import containers
from caisson.logs import get_logger
from caisson.transport.attach import Detached, attach_and_ask

log = get_logger("caisson.pool")

# What a container is made of; anything else in SessionConfig lives on the host.
SHAPE_FIELDS = frozenset(
    {"image", "ttl", "idle_timeout", "grace", "network", "gvisor", "workdir", "agent_user", "env", "mounts", "limits"}
)
# Containers created at once while filling: enough to refill a burst, few enough for the engine.
FILL_WORKERS = 4
# While the pool still holds at least half its size, a refill waits this long after the last
# take: starting a container costs the engine a few hundred ms of CPU, which would otherwise
# compete with the new session's first commands. Below half, it refills at once.
REFILL_DELAY = 0.25
# How long a pooled daemon may take to start and warm up (gVisor on a busy machine: seconds).
WARM_TIMEOUT = 60.0


def shape(config: SessionConfig) -> str:
    return config.model_dump_json(include=set(SHAPE_FIELDS))


class WarmPool:
    def __init__(
        self,
        client: docker.DockerClient,
        config: SessionConfig,
        size: int,
        *,
        create: Callable[[str], containers.CreatedContainer],
        address: str,
        listen: bool = False,
    ) -> None:
        """``create``: makes a container of ``config`` for a session id, as a cold open does
        (with the same admission); ``address``: the engine's, for the attach streams the pool keeps."""
        self.config = config
        self._create = create
        self._address = address
        self._listen = listen
        self.size = size
        self._client = client
        self._shape = shape(config)
        self._ready: deque[tuple[containers.CreatedContainer, Detached | None]] = deque()
        self._filling = 0
        self._failures = 0
        self._lock = threading.Condition()
        self._stopped = False
        self._last_take = 0.0
        self._workers = ThreadPoolExecutor(max_workers=FILL_WORKERS, thread_name_prefix="caisson-pool")
        self._thread = threading.Thread(target=self._keep_full, name="caisson-pool", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def fits(self, config: SessionConfig) -> bool:
        return shape(config) == self._shape

    def take(self) -> tuple[containers.CreatedContainer, Detached | None] | None:
        """A started container with its daemon's attach stream (None where the session will
        use the daemon's socket), or None when the pool is empty (the caller starts one cold)."""
        with self._lock:
            taken = self._ready.popleft() if self._ready else None
            self._last_take = time.monotonic()
            self._lock.notify_all()
            return taken

    @property
    def ready(self) -> int:
        with self._lock:
            return len(self._ready)

    def session_ids(self) -> frozenset[str]:
        with self._lock:
            return frozenset(c.session_id for c, _ in self._ready)

    def container_ids(self) -> list[str]:
        with self._lock:
            return [c.id for c, _ in self._ready]

    def pid_of(self, container_id: str) -> int:
        """A ready container's daemon's host pid where the host reaches its root, else 0."""
        with self._lock:
            return next((c.pid for c, _ in self._ready if c.id == container_id), 0)

    def wait_full(self, timeout: float) -> bool:
        """Block until the pool holds ``size`` containers (for set-up and benchmarks)."""
        with self._lock:
            return self._lock.wait_for(lambda: len(self._ready) >= self.size or self._stopped, timeout)

    def close(self) -> None:
        """Stop filling and remove the idle containers."""
        with self._lock:
            self._stopped = True
            self._lock.notify_all()
        self._thread.join()
        idle = []
        while (taken := self.take()) is not None:
            created, stream = taken
            if stream is not None:
                stream.close()
            idle.append(created.id)
        # At once, on the fill threads: one after another, a busy engine took seconds each.
        list(self._workers.map(lambda container: containers.remove_container(self._client, container), idle))
        self._workers.shutdown(wait=True)

    def _keep_full(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(
                    lambda: self._stopped or len(self._ready) + self._filling < self.size, timeout=5.0
                )
                if self._stopped:
                    return
                wait = self._last_take + REFILL_DELAY - time.monotonic()
                if wait > 0 and 2 * len(self._ready) >= self.size and self._ready:
                    self._lock.wait(timeout=wait)
                    continue
                missing = self.size - len(self._ready) - self._filling
                self._filling += max(0, missing)
            for _ in range(max(0, missing)):
                self._workers.submit(self._fill_one)

    def _fill_one(self) -> None:
        created = None
        stream = None
        try:
            created = self._create(new_session_id())
            containers.start_container(self._client, created.id)
            if self._listen:
                created = dataclasses.replace(created, pid=containers.reachable_pid(self._client, created.id))
            stream = attach_and_ask(
                self._address, self._client.api.api_version, created.id, "ping", timeout=WARM_TIMEOUT
            )
            if created.pid:  # the session will use the socket: the stream was only for the ping
                stream.close()
                stream = None
        except Exception as exc:  # the engine said no: count it, back off, keep going
            if created is not None:
                containers.remove_container(self._client, created.id)
            created = None
            log.warning("could not start a pooled container", error=str(exc))
        with self._lock:
            self._filling -= 1
            if created is None:
                self._failures += 1
                # Back off so a broken engine or image is not hammered.
                self._lock.wait(timeout=min(30.0, 0.5 * self._failures))
            elif self._stopped:
                if stream is not None:
                    stream.close()
                containers.remove_container(self._client, created.id)
            else:
                self._failures = 0
                self._ready.append((created, stream))
            self._lock.notify_all()
