"""The Runtime: one Docker engine connection, many sessions, nothing left behind."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import docker
import structlog

from runtime import docker_backend, gc
from runtime.attach import open_attach
from runtime.channel import Channel
from runtime.config import RuntimeConfig, SessionConfig
from runtime.errors import CaissonError, DaemonDied, ImageError, SessionError
from runtime.models import DaemonInfo
from runtime.session import Session, new_session_id

if TYPE_CHECKING:
    from runtime.policy import ApprovalHandler, AuditLog, Policy
    from runtime.tools.interaction import InteractionHandler

log = structlog.get_logger("caisson.runtime")

MIN_DAEMON_PYTHON = (3, 8)


class Runtime:
    """``async with Runtime() as rt: async with rt.session() as s: ...``"""

    def __init__(self, config: RuntimeConfig | None = None, **overrides: Any) -> None:
        self.config = (config or RuntimeConfig()).model_copy(update=overrides)
        self._client: docker.DockerClient | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._sessions: dict[str, Session] = {}
        self._starting: set[str] = set()
        self._audit: AuditLog | None = None
        self._state = Path(self.config.state_dir)

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            raise CaissonError("the Runtime is not open: use `async with Runtime() as rt`")
        return self._client

    @property
    def audit(self) -> AuditLog:
        """The audit log of every tool call made through this runtime's sessions."""
        if self._audit is None:
            from runtime.policy import AuditLog

            self._audit = AuditLog.in_directory(self._state)
        return self._audit

    @property
    def docker_host(self) -> str:
        return self.config.docker_host or docker_backend.docker_host_url()

    async def __aenter__(self) -> Runtime:
        self._client = await anyio.to_thread.run_sync(docker_backend.connect, self.config.docker_host)
        self._state.mkdir(parents=True, exist_ok=True)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        if self.config.gc_on_start:
            await self.gc()
        return self

    async def __aexit__(self, *exc: object) -> None:
        with anyio.CancelScope(shield=True):
            for session in list(self._sessions.values()):
                await session.close()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)
        self.client.close()
        self._client = None
        if self._audit is not None:
            self._audit.close()
            self._audit = None

    async def gc(self) -> list[gc.Reaped]:
        spare = frozenset(self._sessions) | frozenset(self._starting)
        return await anyio.to_thread.run_sync(lambda: gc.collect(self.client, spare=spare))

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
        **overrides: Any,
    ) -> Session:
        """Start a session; the caller must ``await session.close()`` (or use ``session()``).

        ``overrides`` are SessionConfig fields (``profile="amp"``, ``image=...``, ...)."""
        cfg = SessionConfig.model_validate({**(config or SessionConfig()).model_dump(), **overrides})
        session_id = new_session_id()
        self._starting.add(session_id)
        created = stream = None
        try:
            created = await anyio.to_thread.run_sync(
                docker_backend.create_container, self.client, session_id, self.config.owner, cfg
            )
            stream = await open_attach(
                self.docker_host, self.client.api.api_version, created.id, timeout=self.config.start_timeout
            )
            channel = Channel(stream, max_frame=cfg.max_frame, name=session_id)
            await anyio.to_thread.run_sync(docker_backend.start_container, self.client, created.id)
            return await self._attach_session(
                session_id, created.id, cfg, channel, policy, approval_handler, interaction_handler
            )
        except BaseException:
            with anyio.CancelScope(shield=True):
                if stream is not None:
                    await stream.aclose()
                if created is not None:
                    await anyio.to_thread.run_sync(docker_backend.remove_container, self.client, created.id)
            raise
        finally:
            self._starting.discard(session_id)

    async def reattach(
        self,
        session_id: str,
        config: SessionConfig | None = None,
        *,
        policy: Policy | None = None,
        approval_handler: ApprovalHandler | None = None,
        interaction_handler: InteractionHandler | None = None,
    ) -> Session:
        """Attach to a running session left by another (or a restarted) controller.

        Background tasks and their kept output survive; only in-flight replies are lost."""
        row = await anyio.to_thread.run_sync(docker_backend.find_session_container, self.client, session_id)
        if row is None or row.get("State") != "running":
            raise SessionError(f"session {session_id} has no running container to attach to")
        labels = row.get("Labels") or {}
        cfg = config or SessionConfig(
            profile=labels.get(docker_backend.LABEL_PROFILE, "caisson"),
            tenant=labels.get(docker_backend.LABEL_TENANT, "default"),
        )
        stream = await open_attach(
            self.docker_host, self.client.api.api_version, str(row["Id"]), timeout=self.config.start_timeout
        )
        channel = Channel(stream, max_frame=cfg.max_frame, name=session_id)
        return await self._attach_session(
            session_id, str(row["Id"]), cfg, channel, policy, approval_handler, interaction_handler
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
        assert self._tg is not None
        session = Session(
            session_id=session_id, container_id=container_id, config=cfg, channel=channel,
            close_hook=self._remove_session,
        )
        self._tg.start_soon(channel.run)
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
        # The tool layer (policy, audit, profiles) loads with the first session, not at
        # import: the primitives need none of it.
        from runtime.dispatch import Dispatcher
        from runtime.policy import Policy

        session.interaction_handler = interaction_handler
        session.dispatcher = Dispatcher.create(
            session, policy=policy or Policy.from_env(), audit=self.audit, approval_handler=approval_handler
        )
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

    async def _remove_session(self, session: Session) -> None:
        self._sessions.pop(session.id, None)
        if self._client is not None:
            await anyio.to_thread.run_sync(docker_backend.remove_container, self.client, session.container_id)
        log.debug("session closed", session=session.id)
