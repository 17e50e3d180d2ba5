"""The Runtime: one engine (a ``Backend``, Docker by default), many sessions, nothing left behind."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio

from caisson.audit import AuditLog, AuditSink
from caisson.backend import Backend, Reaped, Sandbox
from caisson.client.models import DaemonInfo
from caisson.client.primitives import new_session_id
from caisson.config import RuntimeConfig, SessionConfig, parse_bytes
from caisson.egress import EgressRules
from caisson.errors import CaissonError, DaemonDied, ImageError, SessionError
from caisson.logs import get_logger
from caisson.policy import ApprovalHandler, Policy
from caisson.session import Session
from caisson.tools.context import InteractionHandler
from caisson.transport.channel import ByteTransport, Channel
from caisson.workspace_diff import WorkspaceDiff, changed_among, compare, current_tree, in_git_metadata

log = get_logger("caisson.runtime")

MIN_DAEMON_PYTHON = (3, 8)


class Runtime:
    """``async with Runtime() as rt: async with rt.session() as s: ...``"""

    def __init__(self, config: RuntimeConfig | None = None, *, backend: Backend | None = None, **overrides: Any) -> None:
        """``backend``: the engine (default: Docker at ``config.docker_host``)."""
        # Validated with the overrides, so ``Runtime(pool=4)`` is read as RuntimeConfig(pool=4) is.
        self.config = RuntimeConfig.model_validate({**(config or RuntimeConfig()).model_dump(), **overrides})
        if backend is None:
            from caisson.docker.backend import DockerBackend  # the engine's client loads only when used

            backend = DockerBackend(
                self.config.docker_host,
                soft_disk_watch=self.config.soft_disk_watch,
                host_threads_share=self.config.gvisor_host_threads_share,
            )
        self.backend: Backend = backend
        self._open = False
        self._sessions: dict[str, Session] = {}
        self._starting: set[str] = set()
        self._audit: AuditLog | None = None
        self._sink: AuditSink | None = None
        self._state = Path(self.config.state_dir)
        self._snapshots: list[str] = []

    @property
    def audit(self) -> AuditLog:
        """The audit log of every tool call made through this runtime's sessions (unless they
        record to another sink, ``audit_to``)."""
        if self._audit is None:
            self._audit = AuditLog.in_directory(self._state)
        return self._audit

    def audit_to(self, sink: AuditSink) -> None:
        """Record the events of sessions opened from now on to ``sink`` instead of the local
        audit log: for an embedding control plane whose store is the audit of record (writing
        both would hash, redact and store every event twice)."""
        self._sink = sink

    async def __aenter__(self) -> Runtime:
        await self.backend.open(self.config.owner, leased=self._leased, soft_quotas=self._soft_quotas)
        self._open = True
        self._state.mkdir(parents=True, exist_ok=True)
        if self.config.gc_on_start:
            await self.gc()
        if self.config.pool is not None:
            pool = self.config.pool
            self.backend.pool_start(self.config.owner, pool.session, pool.size, listen=self._listens(pool.session))
        return self

    def _soft_quotas(self) -> dict[str, int]:
        """Sessions with a disk quota, for a backend whose engine cannot bound a disk itself."""
        return {
            s.container_id: parse_bytes(s.config.limits.disk) for s in list(self._sessions.values()) if s.config.limits.disk
        }

    def _leased(self) -> dict[str, tuple[float, bool]]:
        """The containers this controller keeps alive: grace period, and whether under gVisor."""
        return {
            s.container_id: (s.config.grace, s.config.gvisor) for s in list(self._sessions.values()) if s.config.grace
        }

    def _require_open(self) -> None:
        if not self._open:
            raise CaissonError("the Runtime is not open: use `async with Runtime() as rt`")

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            for session in list(self._sessions.values()):
                await session.close()
            for ref in self._snapshots:
                await self.backend.remove_snapshot(ref)
            await self.backend.aclose()
        self._open = False
        if self._audit is not None:
            self._audit.close()
            self._audit = None

    def sessions(self) -> list[Session]:
        """The sessions this runtime has open."""
        return list(self._sessions.values())

    async def snapshot(self, session: Session) -> str:
        """The session's file system as an image (processes are not kept); open sessions from it
        with ``rt.session(from_snapshot=ref)``. Snapshots this runtime made are removed when it closes."""
        self._require_open()
        ref = await self.backend.snapshot(session.container_id, session.id, self.config.owner, session.config.ttl)
        self._snapshots.append(ref)
        return ref

    async def fork(self, session: Session, n: int, **overrides: Any) -> list[Session]:
        """``n`` new sessions that start from ``session``'s current files (for branching
        rollouts); each is independent of the others and of the original."""
        ref = await self.snapshot(session)
        cfg = session.config.model_copy(update={"image": ref, **overrides})
        forks: list[Session] = []

        async def one() -> None:
            forks.append(await self.open_session(cfg))

        try:
            # Concurrently: the engine overlaps creating and starting containers.
            async with anyio.create_task_group() as tg:
                for _ in range(n):
                    tg.start_soon(one)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                for opened in forks:
                    await opened.close()
            if isinstance(exc, BaseExceptionGroup):
                raise exc.exceptions[0] from None  # the callers' error, as one open would raise it
            raise
        return forks

    async def diff(self, session: Session, path: str | None = None) -> WorkspaceDiff:
        """What changed beneath ``path`` (default: the workdir) since the session's container
        started from its image; see :meth:`Session.diff`."""
        root = session.resolve(path or session.config.workdir)
        current = await current_tree(session, root)
        probe = await self.backend.base_files(session.container_id)
        try:
            scan = await anyio.to_thread.run_sync(probe.scan, root, current)
            ambiguous = {rel: h for rel, h in scan.ambiguous.items() if not in_git_metadata(rel)}
            for rel in await changed_among(session, root, ambiguous):
                scan.differing[rel] = await anyio.to_thread.run_sync(probe.old_file, f"{root.rstrip('/')}/{rel}")
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(probe.close)
        return await compare(session, root, scan.differing, scan.paths, current)

    async def pool_ready(self, timeout: float = 300.0) -> bool:
        """Wait until the warm pool is full (False on timeout, or when there is no pool)."""
        return await self.backend.pool_ready(timeout)

    async def gc(self) -> list[Reaped]:
        """Remove containers whose owner process is gone or whose TTL passed (never this runtime's)."""
        return await self.backend.reap(frozenset(self._sessions) | frozenset(self._starting))

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
        EgressRules(cfg.egress)  # a bad entry fails here, before a container is made
        handlers = (policy, approval_handler, interaction_handler)
        self._require_open()
        pooled = self.backend.pool_take(cfg)
        if pooled is not None:
            try:
                return await self._bind(pooled, cfg, *handlers)
            except CaissonError as exc:  # a pooled daemon that idled out or died: start one cold
                log.warning("pooled container unusable; starting a new one", session=pooled.session_id, error=str(exc))
        session_id = new_session_id()
        self._starting.add(session_id)
        made: Sandbox | None = None
        transport: ByteTransport | None = None
        try:
            made = await self.backend.create(session_id, self.config.owner, cfg, listen=self._listens(cfg))
            # Attached before the start, so the daemon's first words on stderr are kept.
            transport = await self.backend.attach(made.id, timeout=self.config.start_timeout)
            started = await self.backend.start(made)
            transport = await self.backend.connect(started, transport, timeout=self.config.start_timeout)
            channel = Channel(transport, max_frame=cfg.max_frame, name=session_id, explain_death=self._death_cause(made.id))
            return await self._attach_session(session_id, made.id, cfg, channel, *handlers)
        except BaseException:
            with anyio.CancelScope(shield=True):
                if transport is not None:
                    await transport.aclose()
                if made is not None:
                    await self.backend.remove(made.id)
            raise
        finally:
            self._starting.discard(session_id)

    async def _bind(
        self,
        pooled: Sandbox,
        cfg: SessionConfig,
        policy: Policy | None,
        approval_handler: ApprovalHandler | None,
        interaction_handler: InteractionHandler | None,
    ) -> Session:
        """A session on a started container taken from the pool."""
        self._starting.add(pooled.session_id)
        stream: ByteTransport | None = None
        try:
            # Its daemon listened when it was pooled: not reachable now means dead, not starting
            # (waiting for it held a session's start for the whole start timeout, 30 s).
            stream = await self.backend.connect(pooled, None, timeout=self.config.start_timeout, wait=False)
            channel = Channel(stream, max_frame=cfg.max_frame, name=pooled.session_id, explain_death=self._death_cause(pooled.id))
            return await self._attach_session(
                pooled.session_id, pooled.id, cfg, channel, policy, approval_handler, interaction_handler
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                if stream is not None:
                    await stream.aclose()
                await self.backend.remove(pooled.id)
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
        self._require_open()
        asked = tenant or (config.tenant if config is not None else "default")
        row = await self.backend.find(session_id)
        if row is None or row.state != "running" or row.tenant != asked:
            raise SessionError(f"session {session_id} has no running container of tenant {asked} to attach to")
        cfg = config or SessionConfig(profile=row.profile, tenant=asked)
        listen = row.listen and self.config.transport == "auto"
        sandbox = await self.backend.reachable(Sandbox(id=row.id, session_id=session_id, listen=listen))
        stream = await self.backend.connect(sandbox, None, timeout=self.config.start_timeout, wait=False)
        channel = Channel(stream, max_frame=cfg.max_frame, name=session_id, explain_death=self._death_cause(row.id))
        return await self._attach_session(session_id, row.id, cfg, channel, policy, approval_handler, interaction_handler)

    def _listens(self, cfg: SessionConfig) -> bool:
        """Whether a new container's daemon should open its socket: gVisor keeps its file
        system to itself, so the host could not reach it there."""
        return self.config.transport == "auto" and not cfg.gvisor

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
            audit=self._sink or self.audit,
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
        if cfg.egress:
            try:
                await session.start_egress(self.config.egress_hosts)
            except BaseException:
                await session.close()
                raise
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
            return await self.backend.death_cause(container_id) if self._open else None

        return ask

    async def release(self, session: Session, keep_for: float | None) -> None:
        """Stop controlling a session but keep its container (see :meth:`Session.detach`)."""
        self._sessions.pop(session.id, None)
        keep = session.config.ttl if keep_for is None else min(keep_for, session.config.ttl)
        # A lease dated in the future keeps the daemon from ending at its grace period.
        await self.backend.keep(session.container_id, gvisor=session.config.gvisor, until=time.time() + keep)
        log.debug("session detached", session=session.id, seconds=keep)

    async def remove(self, session: Session) -> None:
        """Remove a closed session's container (``Session.close`` calls this)."""
        self._sessions.pop(session.id, None)
        if self._open:
            await self.backend.remove(session.container_id)
        log.debug("session closed", session=session.id)
