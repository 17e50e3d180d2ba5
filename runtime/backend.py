"""The seam between sessions and the engine that runs their sandboxes.

A ``Backend`` makes, starts, reaches and removes the container of each session, and does the
engine's own work (snapshots, the files a session's image started with, reaping, facts for
``caisson doctor``). Docker (runc and gVisor) is the one implementation today
(``caisson.docker.backend``); nothing above this module imports the engine's client. A second
engine (Kubernetes pods, a microVM host) implements these methods; the daemon and its protocol
stay the same, and tests/test_backend.py runs a Runtime over an in-memory fake.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from pydantic import BaseModel

from caisson.config import SessionConfig
from caisson.transport.channel import ByteTransport


class Sandbox(BaseModel):
    """A session's container as the backend made it."""

    id: str
    session_id: str
    # Its daemon also listens on a socket (made so for the local fast path).
    listen: bool = False
    # The started daemon's host pid when the host can reach that socket, else 0.
    pid: int = 0


class SandboxRow(BaseModel):
    """A session container the engine holds, whoever made it."""

    id: str
    session_id: str
    tenant: str = "default"
    owner: str = ""
    profile: str = "caisson"
    state: str = ""
    # The daemon also listens on its socket (the local fast path may reach it).
    listen: bool = False


class Reaped(BaseModel):
    session: str
    container: str
    reason: str


class EngineFacts(BaseModel):
    """What ``caisson doctor`` and a session's info say about the engine."""

    engine: str
    address: str
    version: str = ""
    storage_driver: str = ""
    # What bounds a session's disk: "xfs-pquota", "btrfs-qgroup", or None (the host's soft watch).
    disk_quota: str | None = None
    runtimes: list[str] = []
    # gVisor's containers get no network whatever is asked (runsc with --network=none).
    gvisor_without_network: bool = False
    # The default sandbox image's reference, and whether the engine holds it.
    default_image: str = ""
    default_image_present: bool = False


class OldFile(BaseModel):
    """A file as the session's image has it: its content when small enough to compare."""

    size: int
    data: bytes | None


class BaseScan(BaseModel):
    """The image's side of a diff: files that differ from the current ones in size or mtime,
    files whose size and (whole-second) mtime match so only their content can tell (path ->
    sha256), and every file path."""

    differing: dict[str, OldFile] = {}
    ambiguous: dict[str, str] = {}
    paths: set[str] = set()


class BaseFiles(Protocol):
    """The files a session's image started with (for diffs). Blocking: called in a thread."""

    def scan(self, root: str, current: dict[str, tuple[int, int]]) -> BaseScan:
        """``current``: relative path -> (size, whole-second mtime) of the files there now."""
        ...

    def old_file(self, path: str) -> OldFile: ...

    def close(self) -> None: ...


class Backend(Protocol):
    """One engine. Every method may raise ``DockerUnavailable``-like ``CaissonError``s with a
    message that says what to do; none hangs past the timeouts it is given."""

    @property
    def address(self) -> str: ...

    async def open(
        self,
        owner: str,
        *,
        leased: Callable[[], dict[str, tuple[float, bool]]],
        soft_quotas: Callable[[], dict[str, int]],
    ) -> None:
        """Connect; start what keeps sessions honest (leases for grace periods, the soft disk
        watch where the engine cannot bound a disk). ``leased()``: container id -> (grace, gVisor);
        ``soft_quotas()``: container id -> bytes."""
        ...

    async def aclose(self) -> None: ...

    async def facts(self) -> EngineFacts: ...

    async def ping(self) -> None:
        """Raise unless the engine answers (readiness checks bound the wait)."""
        ...

    async def prepare_image(self, image: str | None, *, rebuild: bool = False) -> str:
        """The default image (built when missing, or ``rebuild``) for None; else ``image``,
        which must exist (``ImageError`` says how to get it)."""
        ...

    async def list_images(self) -> list[dict[str, object]]:
        """The engine's caisson images (default image builds and snapshots)."""
        ...

    async def prune_images(self) -> list[str]:
        """Remove caisson images no container uses other than the current default; their references."""
        ...

    async def create(self, session_id: str, owner: str, config: SessionConfig, *, listen: bool) -> Sandbox: ...

    async def attach(self, container_id: str, *, timeout: float) -> ByteTransport:
        """The stream of the container's main process (before or after its start)."""
        ...

    async def start(self, sandbox: Sandbox) -> Sandbox:
        """Start it; the result is ``reachable``'s."""
        ...

    async def reachable(self, sandbox: Sandbox) -> Sandbox:
        """A started sandbox with ``pid`` set when its daemon listens and the host can reach the socket."""
        ...

    async def connect(
        self, sandbox: Sandbox, attach: ByteTransport | None, *, timeout: float, wait: bool = True
    ) -> ByteTransport:
        """The fastest stream to a started daemon: its socket when ``sandbox.pid`` allows (then
        ``attach``, if given, is closed), else ``attach`` or a new attach stream. ``wait``: for a
        daemon still starting to listen; without, a socket not answering at once (one root in the
        container replaced, say) means the attach stream."""
        ...

    async def remove(self, container_id: str) -> None:
        """Remove it and its disk; a container already gone is not an error."""
        ...

    async def find(self, session_id: str) -> SandboxRow | None: ...

    async def list_sandboxes(self) -> list[SandboxRow]: ...

    async def reap(self, spare: frozenset[str], *, all_owners: bool = False) -> list[Reaped]:
        """Remove condemned containers (TTL passed, owner gone, stopped); ``spare``: session ids in use."""
        ...

    async def snapshot(self, container_id: str, session_id: str, owner: str, ttl: float) -> str: ...

    async def remove_snapshot(self, ref: str) -> None: ...

    async def snapshot_bytes(self, ref: str) -> int:
        """The engine disk a snapshot holds beyond the image it was made from (0 once removed)."""
        ...

    async def layer_bytes(self, container_id: str) -> int:
        """What a snapshot of the container now would copy (its writable layer's files)."""
        ...

    async def base_files(self, container_id: str) -> BaseFiles: ...

    async def watch_deaths(self, on_death: Callable[[str, str, float], Awaitable[None]], since: float) -> None:
        """Call ``on_death(session id, why, when)`` for each session container that died since
        ``since`` (seconds since the epoch) and as each dies, until cancelled: a watcher
        started late or again after an error misses no death."""
        ...

    async def death_cause(self, container_id: str) -> str | None:
        """Why a container's daemon died, as far as the engine knows."""
        ...

    async def keep(self, container_id: str, *, gvisor: bool, until: float) -> None:
        """Keep a session past its grace until ``until`` (a detached session)."""
        ...

    # ---- the warm pool (containers started ahead of need) ----

    def pool_start(self, owner: str, config: SessionConfig, size: int, *, listen: bool) -> None: ...

    def pool_take(self, config: SessionConfig) -> Sandbox | None:
        """A started container of the pool's shape, or None (no pool, another shape, empty)."""
        ...

    def pool_session_ids(self) -> frozenset[str]: ...

    async def pool_ready(self, timeout: float) -> bool: ...
