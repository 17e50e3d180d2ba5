"""Docker as a ``Backend``: runc and gVisor containers on one engine, local or remote.

The engine's calls are blocking (docker-py): each runs in a worker thread. The threads that
keep sessions honest (leases for grace periods, the soft disk watch, the warm pool) are the
backend's: they live from ``open`` to ``aclose``.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import docker

from caisson.backend import BaseFiles, EngineFacts, Reaped, Sandbox, SandboxRow
from caisson.config import SessionConfig
from caisson.docker import containers, host_threads, images, reaper, sparse
from caisson.docker.disk_watch import DiskWatch
from caisson.docker.image_files import ImageProbe
from caisson.docker.lease import LeaseKeeper, renew_lease
from caisson.docker.pool import WarmPool
from caisson.errors import CaissonError, DaemonDied, DaemonProtocolError, ImageError, SessionError
from caisson.logs import get_logger
from caisson.transport import container_root, unix
from caisson.transport.attach import AttachStream, Detached, open_attach, resume
from caisson.transport.channel import ByteTransport

log = get_logger("caisson.docker")


class DockerBackend:
    def __init__(
        self, docker_host: str | None = None, *, soft_disk_watch: bool = False, host_threads_share: float = 0.5
    ) -> None:
        """``soft_disk_watch``: bound disks by the host's watch even where the engine could (tests, the
        bench); ``host_threads_share``: of the host's pid_max, for the gVisor sessions of a local engine."""
        self._docker_host = docker_host
        self._soft_disk_watch = soft_disk_watch
        self._host_threads_share = host_threads_share
        self._host_budget: int | None = None
        self._client: docker.DockerClient | None = None
        self._leases: LeaseKeeper | None = None
        self._disk: DiskWatch | None = None
        self._pool: WarmPool | None = None
        # The attach streams of containers taken from the pool, until their session connects.
        self._pool_streams: dict[str, Detached] = {}
        # Daemons' host pids where the host reaches their container's root (leases renewed there).
        self._pids: dict[str, int] = {}

    @property
    def client(self) -> docker.DockerClient:
        """The engine's client (for this backend's own tools: the image build, the bench's baseline)."""
        if self._client is None:
            raise CaissonError("the Docker backend is not open: use `async with Runtime() as rt`")
        return self._client

    @property
    def address(self) -> str:
        return self._docker_host or containers.docker_host_url()

    async def open(
        self,
        owner: str,
        *,
        leased: Callable[[], dict[str, tuple[float, bool]]],
        soft_quotas: Callable[[], dict[str, int]],
    ) -> None:
        self._client = await anyio.to_thread.run_sync(containers.connect, self._docker_host)
        if self.address.startswith("unix://"):
            self._host_budget = host_threads.host_budget(self._host_threads_share)
        if self._host_budget is None:
            log.info("gVisor sessions' host threads are not budgeted: the engine's kernel cannot be read from here",
                     engine=self.address)
        self._leases = LeaseKeeper(self._client, lambda: {**leased(), **self._pool_leases()}, self._pid_of)
        self._leases.start()
        # The soft watch only where the engine cannot bound a disk itself.
        self._disk = await anyio.to_thread.run_sync(
            DiskWatch, self._client, lambda: {} if self.bounds_disk() else soft_quotas()
        )
        self._disk.start()

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            for keeper in (self._leases, self._disk):
                if keeper is not None:
                    await anyio.to_thread.run_sync(keeper.stop)
            self._leases = self._disk = None
            if self._pool is not None:
                await anyio.to_thread.run_sync(self._pool.close)
                self._pool = None
            for stream in self._pool_streams.values():  # taken, and their session never connected
                stream.close()
            self._pool_streams.clear()
        if self._client is not None:
            self._client.close()
            self._client = None

    @property
    def disk_watch(self) -> DiskWatch | None:
        """The soft disk watch while the backend is open (its rounds' costs, the sessions it ended)."""
        return self._disk

    def bounds_disk(self) -> bool:
        """Whether the engine bounds a container's disk itself (else the soft watch does)."""
        return containers.disk_quotas(self.client, strict=False, soft_watch=self._soft_disk_watch)

    async def facts(self) -> EngineFacts:
        def read() -> EngineFacts:
            with containers.engine_errors("asking the engine about itself"):
                info = self.client.info()
                version = self.client.version().get("Version", "")
            tag = images.image_tag()
            return EngineFacts(
                default_image=tag,
                default_image_present=images.has_image(self.client, tag),
                engine="docker",
                address=self.address,
                version=str(version),
                storage_driver=str(info.get("Driver", "")),
                disk_quota=None if self._soft_disk_watch else containers.quota_mechanism(self.client),
                runtimes=sorted((info.get("Runtimes") or {}).keys()),
                gvisor_without_network=containers.gvisor_without_network(self.client),
            )

        return await anyio.to_thread.run_sync(read)

    async def ping(self) -> None:
        client = self.client
        await anyio.to_thread.run_sync(client.ping, abandon_on_cancel=True)

    async def prepare_image(self, image: str | None, *, rebuild: bool = False) -> str:
        if image is None:
            return await anyio.to_thread.run_sync(lambda: images.build_image(self.client, force=rebuild))
        if not await anyio.to_thread.run_sync(images.has_image, self.client, image):
            raise ImageError(f"image {image} is not on the Docker engine at {self.address}: build or pull it first")
        return image

    async def list_images(self) -> list[dict[str, object]]:
        return await anyio.to_thread.run_sync(images.list_images, self.client)

    async def prune_images(self) -> list[str]:
        return await anyio.to_thread.run_sync(images.prune_images, self.client)

    def _admitted(self, session_id: str, owner: str, config: SessionConfig, listen: bool) -> containers.CreatedContainer:
        """A new container for a session, a cold one or the warm pool's: a gVisor one only
        while the host's threads hold it (``host_threads``)."""
        make = functools.partial(
            containers.create_container,
            self.client, session_id, owner, config, listen=listen, soft_disk=self._soft_disk_watch,
        )
        budget = self._host_budget
        if not config.gvisor or budget is None:
            return make()
        with host_threads.admitting():  # it counts once made
            host_threads.admit(self.client, config, budget)
            return make()

    async def create(self, session_id: str, owner: str, config: SessionConfig, *, listen: bool) -> Sandbox:
        made = await anyio.to_thread.run_sync(self._admitted, session_id, owner, config, listen)
        if made.image.startswith(containers.SNAPSHOT_REPO + ":"):
            try:
                await anyio.to_thread.run_sync(self._sparse_files_in, made.id, made.image)
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await self.remove(made.id)
                raise
        return Sandbox(id=made.id, session_id=session_id, listen=listen)

    def _sparse_files_in(self, container_id: str, image: str) -> None:
        """A container made from a snapshot whose sparse files were kept apart gets them, before it starts."""
        with containers.engine_errors("reading a snapshot's labels"):
            labels = (self.client.api.inspect_image(image).get("Config") or {}).get("Labels") or {}
        tag = labels.get(containers.LABEL_SPARSE)
        if tag is None:
            return
        root = sparse.engine_root(self.client)
        top = sparse.layer(root, container_id) if root is not None else None
        if root is None or top is None or not sparse.store(root, tag).is_dir():
            raise SessionError(f"snapshot {image} keeps its sparse files beside the engine's layers, and they are gone")
        sparse.put_back(top, sparse.store(root, tag), sparse.image_layer(root, container_id))

    async def attach(self, container_id: str, *, timeout: float) -> ByteTransport:
        return await open_attach(self.address, self.client.api.api_version, container_id, timeout=timeout)

    async def start(self, sandbox: Sandbox) -> Sandbox:
        await anyio.to_thread.run_sync(containers.start_container, self.client, sandbox.id)
        return await self.reachable(sandbox)

    async def reachable(self, sandbox: Sandbox) -> Sandbox:
        if not sandbox.listen:
            return sandbox
        pid = await anyio.to_thread.run_sync(containers.reachable_pid, self.client, sandbox.id)
        if pid:
            self._pids[sandbox.id] = pid
        return sandbox.model_copy(update={"pid": pid})

    async def connect(
        self, sandbox: Sandbox, attach: ByteTransport | None, *, timeout: float, wait: bool = True
    ) -> ByteTransport:
        if sandbox.pid:
            if isinstance(attach, AttachStream):
                # The daemon of a new session: the socket once it listens, the attach stream closed.
                return await unix.upgrade(attach, sandbox.pid, timeout=timeout)
            try:
                if not wait:
                    if (sock := unix.try_connect(sandbox.pid)) is not None:
                        return unix.UnixStream(sock)
                    if not container_root.reachable_pid(sandbox.pid, sandbox.id):
                        # Gone, not replaced: an attach stream to its stopped container waited
                        # out the whole start timeout.
                        raise DaemonDied(f"the sandbox daemon of container {sandbox.id[:12]} is gone")
                else:
                    return await unix.connect(sandbox.pid, timeout=timeout)
            except TimeoutError:
                raise DaemonDied(
                    f"the sandbox daemon of container {sandbox.id[:12]} did not listen within {timeout:g} s"
                ) from None
            except DaemonProtocolError as exc:
                log.warning("using the attach stream instead of the daemon's socket", container=sandbox.id[:12], error=str(exc))
        if attach is None and (pooled := self._pool_streams.pop(sandbox.id, None)) is not None:
            return await resume(pooled)
        return attach if attach is not None else await self.attach(sandbox.id, timeout=timeout)

    async def remove(self, container_id: str) -> None:
        def remove() -> None:
            self._pids.pop(container_id, None)
            containers.remove_container(self.client, container_id)
            sparse.forget(self.client, container_id)

        await anyio.to_thread.run_sync(remove)

    async def find(self, session_id: str) -> SandboxRow | None:
        def look() -> dict[str, object] | None:
            row = containers.find_session_container(self.client, session_id)
            if row is not None and row.get("State") == "paused":
                # Left paused by a controller that died in a snapshot: files back, running again.
                sparse.recover(self.client, str(row["Id"]), resume_unmarked=True)
                row = containers.find_session_container(self.client, session_id)
            return row

        row = await anyio.to_thread.run_sync(look)
        return None if row is None else _row(row)

    async def list_sandboxes(self) -> list[SandboxRow]:
        rows = await anyio.to_thread.run_sync(containers.list_session_containers, self.client)
        return [_row(r) for r in rows]

    async def reap(self, spare: frozenset[str], *, all_owners: bool = False) -> list[Reaped]:
        pooled = self.pool_session_ids()
        return await anyio.to_thread.run_sync(
            lambda: reaper.collect(self.client, spare=spare | pooled, all_owners=all_owners)
        )

    async def snapshot(self, container_id: str, session_id: str, owner: str, ttl: float) -> str:
        return await anyio.to_thread.run_sync(self._snapshot, container_id, session_id, owner, ttl)

    def _snapshot(self, container_id: str, session_id: str, owner: str, ttl: float) -> str:
        """A commit; on a local btrfs or overlay2 engine (runc and gVisor) the
        sparse files are kept apart while it runs (docker/sparse.py), the container paused
        throughout, under a marker that lets whoever comes next undo it should this controller die."""
        client = self.client
        containers.keep_tmp_on_layer(client, container_id)
        root = sparse.engine_root(client)
        top = sparse.layer(root, container_id) if root is not None else None
        if root is None or top is None:
            return containers.snapshot(client, container_id, session_id, owner, ttl)
        sparse.recover(client, container_id, resume_unmarked=True)
        tag = containers.snapshot_tag(session_id)
        kept = sparse.store(root, tag)
        marker = sparse.Unfinished(root, container_id, tag)
        try:
            try:
                with containers.engine_errors("pausing a session for its snapshot"):
                    client.api.pause(container_id)
            except docker.errors.APIError as exc:
                marker.done()
                raise SessionError(
                    f"Docker could not pause session {session_id} for its snapshot: {exc.explanation or exc}"
                ) from None
            try:
                sparse.stash(top, kept)
                ref = containers.snapshot(client, container_id, session_id, owner, ttl, tag=tag, paused=True, sparse=True)
                sparse.put_back(top, kept)
                # Done before the resume: a marker beside a running container would have the
                # store cloned over the agent's newer writes.
                marker.done()
            except BaseException:
                # Undone as a successor would undo it, once this controller lets go of the marker.
                marker.release()
                sparse.recover(client, container_id, resume_unmarked=False)
                raise
            with containers.engine_errors("resuming a session after its snapshot"):
                client.api.unpause(container_id)
            return ref
        finally:
            marker.release()

    async def remove_snapshot(self, ref: str) -> None:
        def remove() -> None:
            containers.remove_snapshot(self.client, ref)
            root = sparse.engine_root(self.client)
            if root is not None and ref.startswith(containers.SNAPSHOT_REPO + ":"):
                sparse.remove(root, ref.split(":", 1)[1])

        await anyio.to_thread.run_sync(remove)

    async def snapshot_bytes(self, ref: str) -> int:
        def size() -> int:
            root = sparse.engine_root(self.client)
            kept = sparse.store(root, ref.split(":", 1)[1]) if root is not None and ":" in ref else None
            return containers.snapshot_bytes(self.client, ref) + (sparse.allocated(kept) if kept is not None else 0)

        return await anyio.to_thread.run_sync(size)

    async def layer_bytes(self, container_id: str) -> int:
        sizes = self._disk.sizes if self._disk is not None else None
        if sizes is None:
            raise CaissonError("the Docker backend is not open: use `async with Runtime() as rt`")
        # The file system's allocated figure where it keeps one (sparse files' holes are not
        # copied there), else the engine's apparent sizes (what its commit copies).
        return await anyio.to_thread.run_sync(lambda: sizes.quick(container_id) or sizes.engine(container_id))

    async def base_files(self, container_id: str) -> BaseFiles:
        return await anyio.to_thread.run_sync(ImageProbe, self.client, container_id)

    async def watch_deaths(self, on_death: Callable[[str, str, float], Awaitable[None]], since: float) -> None:
        client = self.client
        filters = {"type": "container", "event": ["die"], "label": containers.LABEL_SESSION}
        stream = await anyio.to_thread.run_sync(
            lambda: client.events(decode=True, filters=filters, since=f"{since:.9f}")
        )
        send, receive = anyio.create_memory_object_stream[dict[str, Any]](100)

        def pump() -> None:
            with send:
                for event in stream:
                    anyio.from_thread.run(send.send, event)

        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: anyio.to_thread.run_sync(pump, abandon_on_cancel=True))
                async for event in receive:
                    attributes = (event.get("Actor") or {}).get("Attributes") or {}
                    when = event.get("timeNano", 0) / 1e9 or float(event.get("time", since))
                    why = f"its container stopped (exit code {attributes.get('exitCode', '?')})"
                    await on_death(attributes.get(containers.LABEL_SESSION, ""), why, when)
        finally:
            stream.close()

    async def death_cause(self, container_id: str) -> str | None:
        if self._disk is not None and container_id in self._disk.reasons:
            return self._disk.reasons[container_id]
        if self._client is None:
            return None
        return await anyio.to_thread.run_sync(containers.death_cause, self._client, container_id)

    async def keep(self, container_id: str, *, gvisor: bool, until: float) -> None:
        await anyio.to_thread.run_sync(
            lambda: renew_lease(
                self.client, container_id, gvisor=gvisor, until=until, pid=self._pid_of(container_id)
            )
        )

    def pool_start(self, owner: str, config: SessionConfig, size: int, *, listen: bool) -> None:
        self._pool = WarmPool(
            self.client, config, size, address=self.address, listen=listen,
            create=lambda session_id: self._admitted(session_id, owner, config, listen),
        )
        self._pool.start()

    def pool_take(self, config: SessionConfig) -> Sandbox | None:
        if self._pool is None or not self._pool.fits(config):
            return None
        taken = self._pool.take()
        if taken is None:
            return None
        made, stream = taken
        if stream is not None:
            self._pool_streams[made.id] = stream
        if made.pid:
            self._pids[made.id] = made.pid
        return Sandbox(id=made.id, session_id=made.session_id, listen=made.pid > 0, pid=made.pid)

    def pool_session_ids(self) -> frozenset[str]:
        return self._pool.session_ids() if self._pool is not None else frozenset()

    def _pid_of(self, container_id: str) -> int:
        pool = self._pool
        return self._pids.get(container_id) or (pool.pid_of(container_id) if pool is not None else 0)

    def _pool_leases(self) -> dict[str, tuple[float, bool]]:
        """The pool's containers, kept alive like sessions: grace and gVisor flag."""
        pool = self._pool
        if pool is None or not pool.config.grace:
            return {}
        return dict.fromkeys(pool.container_ids(), (pool.config.grace, pool.config.gvisor))

    async def pool_ready(self, timeout: float) -> bool:
        if self._pool is None:
            return False
        return await anyio.to_thread.run_sync(self._pool.wait_full, timeout)


def _row(row: dict[str, object]) -> SandboxRow:
    labels = row.get("Labels") or {}
    assert isinstance(labels, dict)
    return SandboxRow(
        id=str(row["Id"]),
        session_id=str(labels.get(containers.LABEL_SESSION, "")),
        tenant=str(labels.get(containers.LABEL_TENANT, "default")),
        owner=str(labels.get(containers.LABEL_OWNER, "")),
        profile=str(labels.get(containers.LABEL_PROFILE, "caisson")),
        state=str(row.get("State", "")),
        listen=labels.get(containers.LABEL_LISTEN) == "1",
    )
