"""A session as the library's user sees it: the primitives of its container's daemon, plus
tool calls through the session's profile, policy and audit log, plus its lifecycle.

``Session`` is a :class:`SandboxClient` (exec, read_file, write_file, spawn, ...) with
``call`` and ``tools`` on top. Tool handlers never get a Session: the dispatcher hands them
a :class:`ToolContext` with just what they need.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Protocol

import anyio

from caisson.audit import AuditLog
from caisson.client import archive
from caisson.client.primitives import SandboxClient
from caisson.config import SessionConfig
from caisson.dispatch import Dispatcher
from caisson.docker.diff import WorkspaceDiff
from caisson.policy import ApprovalHandler, GrantStore, Policy
from caisson.profiles.export import export_tools
from caisson.tools.base import ToolResult
from caisson.tools.context import InteractionHandler, ToolContext
from caisson.transport.channel import Channel


class SessionOwner(Protocol):
    """What a session asks of the runtime that opened it: the work that needs the engine."""

    async def snapshot(self, session: Session) -> str: ...
    async def fork(self, session: Session, n: int, **overrides: Any) -> list[Session]: ...
    async def diff(self, session: Session, path: str | None = None) -> WorkspaceDiff: ...
    async def remove(self, session: Session) -> None: ...
    async def release(self, session: Session, keep_for: float | None) -> None: ...


class Session(SandboxClient):
    def __init__(
        self,
        *,
        session_id: str,
        container_id: str,
        config: SessionConfig,
        channel: Channel,
        owner: SessionOwner,
        policy: Policy,
        audit: AuditLog,
        approval_handler: ApprovalHandler | None = None,
        interaction_handler: InteractionHandler | None = None,
    ) -> None:
        super().__init__(session_id=session_id, container_id=container_id, config=config, channel=channel)
        self._owner = owner
        self._closed = False
        self._dispatcher = Dispatcher.create(
            self,
            policy=policy,
            audit=audit,
            approval_handler=approval_handler,
            interaction_handler=interaction_handler,
        )

    # ---- tools ----------------------------------------------------------------------

    async def call(self, tool: str, args: dict[str, Any] | None = None) -> ToolResult:
        """Run one tool call of this session's profile: validate, decide, audit, execute."""
        return await self._dispatcher.call(tool, args or {})

    def tools(self, format: str = "json_schema") -> list[dict[str, Any]]:
        """This session's tools as ``openai``, ``anthropic``, ``mcp`` or ``json_schema`` definitions."""
        return export_tools(self._dispatcher.profile, format)

    @property
    def grants(self) -> GrantStore:
        """Permissions granted for the rest of this session (by approvals or ask_for_permissions)."""
        return self._dispatcher.grants

    @property
    def interaction_handler(self) -> InteractionHandler | None:
        """Who answers ask_user_questions; the embedding program may change it mid-session."""
        return self._dispatcher.interaction_handler

    @interaction_handler.setter
    def interaction_handler(self, handler: InteractionHandler | None) -> None:
        self._dispatcher.interaction_handler = handler

    def tool_context(self, call_id: str = "") -> ToolContext:
        """The context a tool handler of this session gets, for calling a handler directly
        (bypassing policy and audit: for the embedding program's own use and tests)."""
        return self._dispatcher.context(call_id)

    # ---- bulk copy ------------------------------------------------------------------

    async def copy_in(self, source: str | os.PathLike[str] | AsyncIterable[bytes] | bytes, dest: str) -> None:
        """Put a host file or directory (or a tar stream) into ``dest``, as the agent's files."""
        await archive.copy_in(self, source, dest)

    def copy_out(self, path: str) -> AsyncIterator[bytes]:
        """A container file or directory as a tar stream, in chunks."""
        return archive.copy_out(self, path)

    async def copy_out_to(self, path: str, host_dir: str | os.PathLike[str]) -> list[str]:
        """A container file or directory unpacked into a host directory, no link followed on the
        way; returns the symbolic links left out because they lead out of it."""
        return await archive.copy_out_to(self, path, host_dir)

    # ---- engine-side work ---------------------------------------------------------------

    async def snapshot(self) -> str:
        """This session's files as an image; ``rt.session(from_snapshot=ref)`` starts from it."""
        return await self._owner.snapshot(self)

    async def fork(self, n: int, **overrides: Any) -> list[Session]:
        """``n`` independent sessions starting from this one's current files; close each."""
        return await self._owner.fork(self, n, **overrides)

    async def diff(self, path: str | None = None) -> WorkspaceDiff:
        """Files added, modified and deleted beneath ``path`` (default: the workdir) since the
        session's container started from its image, with a unified diff for text files."""
        return await self._owner.diff(self, path)

    # ---- lifecycle ------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    async def detach(self, keep_for: float | None = None) -> None:
        """Leave the container running, without this controller, for ``keep_for`` seconds (or
        until its TTL) so someone can look inside or ``rt.reattach`` it; this object closes."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._owner.release(self, keep_for)
            await self.channel.aclose()

    async def close(self) -> None:
        """Remove the container. Safe to call twice; never raises for an already-dead session."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self.channel.aclose()
            await self._owner.remove(self)
