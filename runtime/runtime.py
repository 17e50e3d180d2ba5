"""The Runtime: one Docker engine connection, many sessions, nothing left behind."""

from __future__ import annotations

import functools
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import docker

from caisson.audit import AuditLog
from caisson.client.models import DaemonInfo
from caisson.client.primitives import new_session_id
from caisson.config import RuntimeConfig, SessionConfig
from caisson.docker import containers, diff, reaper
from caisson.docker.diff import WorkspaceDiff
from caisson.docker.disk_watch import DiskWatch
from caisson.docker.lease import LeaseKeeper
from caisson.docker.pool import WarmPool
from caisson.errors import CaissonError, DaemonDied, DaemonProtocolError, ImageError, SessionError
from caisson.logs import get_logger
from caisson.policy import ApprovalHandler, Policy
from caisson.session import Session
from caisson.tools.context import InteractionHandler
from caisson.transport import unix
from caisson.transport.attach import open_attach
from caisson.transport.channel import ByteTransport, Channel

log = get_logger("caisson.runtime")

MIN_DAEMON_PYTHON = (3, 8)


class Runtime:
    """``async with Runtime() as rt: async with rt.session() as s: ...``"""

    def __init__(self, config: RuntimeConfig | None = None, **overrides: Any) -> None:
        self.config = (config or RuntimeConfig()).model_copy(update=overrides)
        self._client: docker.DockerClient | None = None
        self._sessions: dict[str, Session] = {}
        self._starting: set[str] = set()
        self._audit: AuditLog | None = None
        self._state = Path(self.config.state_dir)
        self._pool: WarmPool | None = None
        self._leases: LeaseKeeper | None = None
        self._disk: DiskWatch | None = None
        self._snapshots: list[str] = []

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            raise CaissonError("the Runtime is not open: use `async with Runtime() as rt`")
        return self._client

    @property
    def audit(self) -> AuditLog:
        """The audit log of every tool call made through this runtime's sessions."""
        if self._audit is None:
            self._audit = AuditLog.in_directory(self._state)
        return self._audit

    @property
    def docker_host(self) -> str:
        return self.config.docker_host or containers.docker_host_url()

    async def __aenter__(self) -> Runtime:
        self._client = await anyio.to_thread.run_sync(containers.connect, self.config.docker_host)
        self._state.mkdir(parents=True, exist_ok=True)
        if self.config.gc_on_start:
            await self.gc()
        if self.config.pool is not None:
            self._pool = WarmPool(
                self.client,
                self.config.owner,
                self.config.pool.session,
                self.config.pool.size,
                listen=self._listens(self.config.pool.session),
            )
            self._pool.start()
        self._leases = LeaseKeeper(self.client, self._leased)
        self._leases.start()
        self._disk = DiskWatch(self.client, self.config.owner, self._soft_quotas)
        self._disk.start()
        return self

    def _soft_quotas(self) -> dict[str, int]:
        """Sessions whose disk quota the host must enforce itself (the engine cannot)."""
        if self._client is None or containers.disk_quotas(self._client, strict=False):
            return {}
        return {
            s.container_id: containers.parse_bytes(s.config.limits.disk)
            for s in list(self._sessions.values())
            if s.config.limits.disk
        }

    def _leased(self) -> dict[str, tuple[float, bool]]:
        """The containers this controller keeps alive: grace period, and whether under gVisor."""
        leased = {
            s.container_id: (s.config.grace, s.config.gvisor) for s in list(self._sessions.values()) if s.config.grace
        }
        pool = self._pool
        if pool is not None and pool.config.grace:
            leased.update(dict.fromkeys(pool.container_ids(), (pool.config.grace, pool.config.gvisor)))
        return leased

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            if self._leases is not None:
                await anyio.to_thread.run_sync(self._leases.stop)
                self._leases = None
            if self._disk is not None:
                await anyio.to_thread.run_sync(self._disk.stop)
                self._disk = None
            if self._pool is not None:
                await anyio.to_thread.run_sync(self._pool.close)
                self._pool = None
            for session in list(self._sessions.values()):
                await session.close()
            for ref in self._snapshots:
                await anyio.to_thread.run_sync(containers.remove_snapshot, self.client, ref)
        self.client.close()
        self._client = None
        if self._audit is not None:
            self._audit.close()
            self._audit = None

    def sessions(self) -> list[Session]:
        """The sessions this runtime has open."""
        return list(self._sessions.values())

    async def snapshot(self, session: Session) -> str:
        """The session's file system as an image (processes are not kept); open sessions from it
        with ``rt.session(image=ref)``. Snapshots this runtime made are removed when it closes."""
        ref = await anyio.to_thread.run_sync(
            containers.snapshot, self.client, session.container_id, session.id, self.config.owner, session.config.ttl
        )
        self._snapshots.append(ref)
        return ref

    async def fork(self, session: Session, n: int, **overrides: Any) -> list[Session]:
        """``n`` new sessions that start from ``session``'s current files (for branching
        rollouts); each is independent of the others and of the original."""
        ref = await self.snapshot(session)
        cfg = session.config.model_copy(update={"image": ref, **overrides})
        forks: list[Session] = []
        try:
            for _ in range(n):
                forks.append(await self.open_session(cfg))
        except BaseException:
            with anyio.CancelScope(shield=True):
                for opened in forks:
                    await opened.close()
            raise
        return forks

    async def diff(self, session: Session, path: str | None = None) -> WorkspaceDiff:
        """What changed beneath ``path`` (default: the workdir) since the session's container
        started from its image; see :meth:`Session.diff`."""
        root = session.resolve(path or session.config.workdir)
        current = await diff.current_tree(session, root)
        probe = await anyio.to_thread.run_sync(diff.ImageProbe, self.client, session.container_id)
        try:
            scan = await anyio.to_thread.run_sync(probe.scan, root, current)
            for rel in await diff.changed_among(session, root, scan.ambiguous):
                scan.differing[rel] = await anyio.to_thread.run_sync(probe.old_file, f"{root.rstrip('/')}/{rel}")
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(probe.close)
        return await diff.compare(session, root, scan.differing, scan.paths, current)

    async def pool_ready(self, timeout: float = 300.0) -> bool:
        """Wait until the warm pool is full (False on timeout, or when there is no pool)."""
        if self._pool is None:
            return False
        return await anyio.to_thread.run_sync(self._pool.wait_full, timeout)

    async def gc(self) -> list[reaper.Reaped]:
        pooled = self._pool.session_ids() if self._pool is not None else frozenset()
        spare = frozenset(self._sessions) | frozenset(self._starting) | pooled
        return await anyio.to_thread.run_sync(lambda: reaper.collect(self.client, spare=spare))

    @asynccontextmanager
    async def session(self, config: SessionConfig | None = None, **overrides: Any) -> AsyncIterator[Session]:
        s = await self.open_session(config, **overrides)
        try:
            yield s
        finally:
            await s.close()

    async def open_session(
        self,
        config: SessionConfig | None = None,
        *,
        policy: Policy | None = None,
        approval_handler: ApprovalHandler | None = None,
        interaction_handler: InteractionHandler | None = None,
        from_snapshot: str | None = None,
        **overrides: Any,
    ) -> Session:
        """Start a session; the caller must ``await session.close()`` (or use ``session()``).

        ``overrides`` are SessionConfig fields (``profile="amp"``, ``image=...``, ...);
        ``from_snapshot``: a reference from ``snapshot()`` to start from."""
        if from_snapshot is not None:
            overrides["image"] = from_snapshot
        cfg = SessionConfig.model_validate({**(config or SessionConfig()).model_dump(), **overrides})
        handlers = (policy, approval_handler, interaction_handler)
        pooled = self._pool.take() if self._pool is not None and self._pool.fits(cfg) else None
        if pooled is not None:
            try:
                return await self._bind(pooled, cfg, *handlers)
            except CaissonError as exc:  # a pooled daemon that idled out or died: start one cold
                log.warning("pooled container unusable; starting a new one", session=pooled.session_id, error=str(exc))
        session_id = new_session_id()
        self._starting.add(session_id)
        created = None
        transport: ByteTransport | None = None
        listen = self._listens(cfg)
        try:
            created = await anyio.to_thread.run_sync(
                functools.partial(
                    containers.create_container, self.client, session_id, self.config.owner, cfg, listen=listen
                )
            )
            # Attached before the start, so the daemon's first words on stderr are kept.
            transport = attach = await open_attach(
                self.docker_host, self.client.api.api_version, created.id, timeout=self.config.start_timeout
            )
            await anyio.to_thread.run_sync(containers.start_container, self.client, created.id)
            if listen and (pid := await anyio.to_thread.run_sync(containers.reachable_pid, self.client, created.id)):
                # Either the attach stream again, or the socket with the attach stream closed.
                transport = await unix.upgrade(attach, pid, timeout=self.config.start_timeout)
            channel = Channel(
                transport, max_frame=cfg.max_frame, name=session_id, explain_death=self._death_cause(created.id)
            )
            return await self._attach_session(
                session_id, created.id, cfg, channel, policy, approval_handler, interaction_handler
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                if transport is not None:
                    await transport.aclose()
                if created is not None:
                    await anyio.to_thread.run_sync(containers.remove_container, self.client, created.id)
            raise
        finally:
            self._starting.discard(session_id)

    async def _bind(
        self,
        pooled: containers.CreatedContainer,
        cfg: SessionConfig,
        policy: Policy | None,
        approval_handler: ApprovalHandler | None,
        interaction_handler: InteractionHandler | None,
    ) -> Session:
        """A session on a started container taken from the pool."""
        self._starting.add(pooled.session_id)
        stream: ByteTransport | None = None
        try:
            stream = await self._open_stream(pooled.id, pooled.pid, wait=True)
            channel = Channel(stream, max_frame=cfg.max_frame, name=pooled.session_id, explain_death=self._death_cause(pooled.id))
            return await self._attach_session(
                pooled.session_id, pooled.id, cfg, channel, policy, approval_handler, interaction_handler
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                if stream is not None:
                    await stream.aclose()
                await anyio.to_thread.run_sync(containers.remove_container, self.client, pooled.id)
            raise
        finally:
            self._starting.discard(pooled.session_id)

    async def reattach(
        self,
        session_id: str,
        config: SessionConfig | None = None,
        *,
        tenant: str | None = None,
        policy: Policy | None = None,
        approval_handler: ApprovalHandler | None = None,
        interaction_handler: InteractionHandler | None = None,
    ) -> Session:
        """Attach to a running session of ``tenant`` (default: ``config.tenant``, else
        "default") left by another (or a restarted) controller; another tenant's session is
        answered as if it did not exist.

        Background tasks and their kept output survive; only in-flight replies are lost."""
        asked = tenant or (config.tenant if config is not None else "default")
        row = await anyio.to_thread.run_sync(containers.find_session_container, self.client, session_id)
        labels = (row or {}).get("Labels") or {}
        if row is None or row.get("State") != "running" or labels.get(containers.LABEL_TENANT, "default") != asked:
            raise SessionError(f"session {session_id} has no running container of tenant {asked} to attach to")
        cfg = config or SessionConfig(profile=labels.get(containers.LABEL_PROFILE, "caisson"), tenant=asked)
        pid = 0
        if labels.get(containers.LABEL_LISTEN) == "1" and self.config.transport == "auto":
            pid = await anyio.to_thread.run_sync(containers.reachable_pid, self.client, str(row["Id"]))
        stream = await self._open_stream(str(row["Id"]), pid, wait=False)
        channel = Channel(stream, max_frame=cfg.max_frame, name=session_id, explain_death=self._death_cause(str(row["Id"])))
        return await self._attach_session(
            session_id, str(row["Id"]), cfg, channel, policy, approval_handler, interaction_handler
        )

    def _listens(self, cfg: SessionConfig) -> bool:
        """Whether a new container's daemon should open its socket: gVisor keeps its file
        system to itself, so the host could not reach it there."""
        return self.config.transport == "auto" and not cfg.gvisor

    async def _open_stream(self, container_id: str, pid: int, *, wait: bool) -> ByteTransport:
        """The stream to a started daemon: its socket when ``pid`` says it is reachable
        (``wait``: for as long as a starting daemon may take to listen), else its attach stream."""
        if pid:
            if wait:
                try:
                    return await unix.connect(pid, timeout=self.config.start_timeout)
                except TimeoutError:
                    raise DaemonDied(
                        f"the sandbox daemon of container {container_id[:12]} did not listen within "
                        f"{self.config.start_timeout:g} s"
                    ) from None
            try:
                if (sock := unix.try_connect(pid)) is not None:
                    return unix.UnixStream(sock)
            except DaemonProtocolError as exc:
                log.warning("using the attach stream instead of the daemon's socket", container=container_id[:12], error=str(exc))
        return await open_attach(
            self.docker_host, self.client.api.api_version, container_id, timeout=self.config.start_timeout
        )

    async def _attach_session(
        self,
        session_id: str,
        container_id: str,
        cfg: SessionConfig,
        channel: Channel,
        policy: Policy | None,
        approval_handler: ApprovalHandler | None,
        interaction_handler: InteractionHandler | None,
    ) -> Session:
        session = Session(
            session_id=session_id,
            container_id=container_id,
            config=cfg,
            channel=channel,
            owner=self,
            policy=policy or Policy.from_env(),
            audit=self.audit,
            approval_handler=approval_handler,
            interaction_handler=interaction_handler,
        )
        self._sessions[session_id] = session
        try:
            info = await self._first_ping(session)
        except BaseException:
            await session.close()
            raise
        version = tuple(int(p) for p in info.python.split(".")[:2])
        if version < MIN_DAEMON_PYTHON:
            await session.close()
            raise ImageError(f"image {cfg.image} has Python {info.python}; the daemon needs >= 3.8")
        log.debug("session ready", session=session_id, container=container_id[:12], image=cfg.image or "default")
        return session

    async def _first_ping(self, session: Session) -> DaemonInfo:
        started = time.monotonic()
        try:
            return await session.ping(timeout=self.config.start_timeout)
        except DaemonDied as exc:
            tail = str(exc)
            if "not found" in tail or "No such file" in tail or "exec" in tail:
                raise ImageError(
                    f"the daemon could not start in image {session.config.image or 'default'}: it needs "
                    f"python3 >= 3.8 on PATH ({tail})"
                ) from None
            raise
        finally:
            log.debug("first ping", session=session.id, seconds=round(time.monotonic() - started, 3))

    def _death_cause(self, container_id: str) -> Callable[[], Awaitable[str | None]]:
        async def ask() -> str | None:
            if self._disk is not None and container_id in self._disk.reasons:
                return self._disk.reasons[container_id]
            if self._client is None:
                return None
            return await anyio.to_thread.run_sync(containers.death_cause, self._client, container_id)

        return ask

    async def release(self, session: Session, keep_for: float | None) -> None:
        """Stop controlling a session but keep its container (see :meth:`Session.detach`)."""
        self._sessions.pop(session.id, None)
        keep = session.config.ttl if keep_for is None else min(keep_for, session.config.ttl)
        # A lease dated in the future keeps the daemon from ending at its grace period.
        await anyio.to_thread.run_sync(
            lambda: containers.renew_lease(
                self.client, session.container_id, gvisor=session.config.gvisor, until=time.time() + keep
            )
        )
        log.debug("session detached", session=session.id, seconds=keep)

    async def remove(self, session: Session) -> None:
        """Remove a closed session's container (``Session.close`` calls this)."""
        self._sessions.pop(session.id, None)
        if self._client is not None:
            await anyio.to_thread.run_sync(containers.remove_container, self.client, session.container_id)
        log.debug("session closed", session=session.id)
