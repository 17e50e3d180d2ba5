"""A session as the library's user sees it: the primitives of its container's daemon, plus
tool calls through the session's profile, policy and audit log, plus its lifecycle.

``Session`` is a :class:`SandboxClient` (exec, read_file, write_file, spawn, ...) with
``call`` and ``tools`` on top. Tool handlers never get a Session: the dispatcher hands them
a :class:`ToolContext` with just what they need.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any, Protocol

import anyio

from caisson.audit import AuditSink
from caisson.client import archive
from caisson.client.primitives import SandboxClient
from caisson.config import SessionConfig
from caisson.dispatch import Dispatcher
from caisson.egress import EgressGateway, EgressStats
from caisson.errors import OpError
from caisson.policy import ApprovalHandler, GrantStore, Policy, is_secret, is_within
from caisson.profiles.export import export_tools
from caisson.tools.base import ToolResult
from caisson.tools.context import InteractionHandler, ToolContext
from caisson.transport.channel import Channel
from caisson.workspace_diff import WorkspaceDiff


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
        audit: AuditSink,
        approval_handler: ApprovalHandler | None = None,
        interaction_handler: InteractionHandler | None = None,
    ) -> None:
        super().__init__(session_id=session_id, container_id=container_id, config=config, channel=channel)
        self._owner = owner
        self._closed = False
        self._audit = audit
        self._egress: EgressGateway | None = None
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
    def policy(self) -> Policy:
        """The policy this session's calls are decided by (its workspace roots filled in)."""
        return self._dispatcher.engine.policy

    async def command_client(self, tool: str, command: str, *, cwd: str | None, env: dict[str, str]) -> SandboxClient:
        """A client to run ``command`` with, as the policy decides it outside a tool call (see
        :meth:`Dispatcher.command_client`): for a hosted tenant's own commands."""
        return await self._dispatcher.command_client(tool, command, cwd=cwd, env=env)

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

    # ---- egress ---------------------------------------------------------------------

    async def start_egress(self, hosts: dict[str, str]) -> None:
        """Serve the proxy of a session with ``config.egress`` (the runtime does, on open)."""
        if self._egress is None and self.config.egress:
            gateway = EgressGateway(self, engine=self._dispatcher.engine, audit=self._audit, hosts=hosts)
            await gateway.start()
            self._egress = gateway

    @property
    def egress_stats(self) -> EgressStats | None:
        """What this session's egress did so far (None: it has none)."""
        return self._egress.stats if self._egress is not None else None

    async def _stop_egress(self) -> None:
        if self._egress is not None:
            await self._egress.aclose()

    # ---- bulk copy ------------------------------------------------------------------

    async def copy_in(self, source: archive.CopySource, dest: str) -> None:
        """Put a host file or directory (or tar bytes, a binary file object of a tar, or a tar
        stream) into ``dest``, as the agent's files."""
        await archive.copy_in(self, source, dest)

    def copy_out(self, path: str, *, include_secrets: bool = False) -> AsyncIterator[bytes]:
        """A container file or directory as a tar stream, in chunks. By default as the policy
        sees the agent's reads: beneath the workspace roots, secret files (and files with other
        names or reached through a link) left out; ``include_secrets=True`` copies all the
        agent can read, for the embedding program's own use (never a tenant's)."""
        return archive.copy_out(self, path, **self._read_scope(include_secrets))

    async def copy_out_to(
        self, path: str, host_dir: str | os.PathLike[str], *, include_secrets: bool = False
    ) -> list[str]:
        """A container file or directory unpacked into a host directory, no link followed on the
        way; returns the symbolic links left out because they lead out of it. Secrets and roots
        as for :meth:`copy_out`."""
        return await archive.copy_out_to(self, path, host_dir, **self._read_scope(include_secrets))

    def _read_scope(self, include_secrets: bool) -> dict[str, Any]:
        """What the policy lets a host-side read of the agent's files see."""
        if include_secrets:
            return {}
        policy = self.policy
        return {
            "roots": policy.workspace_roots,
            "secret": lambda path: is_secret(path, policy.secret_patterns, policy.secret_exceptions) is not None,
        }

    # ---- engine-side work ---------------------------------------------------------------

    async def snapshot(self) -> str:
        """This session's files as an image; ``rt.session(from_snapshot=ref)`` starts from it."""
        return await self._owner.snapshot(self)

    async def fork(self, n: int, **overrides: Any) -> list[Session]:
        """``n`` independent sessions starting from this one's current files; close each."""
        return await self._owner.fork(self, n, **overrides)

    async def diff(self, path: str | None = None, *, include_secrets: bool = False) -> WorkspaceDiff:
        """Files added, modified and deleted beneath ``path`` (default: the workdir) since the
        session's container started from its image, with a unified diff for text files. By
        default ``path`` must lie beneath the workspace roots and secret files are left out;
        ``include_secrets=True`` is for the embedding program's own use."""
        if include_secrets:
            return await self._owner.diff(self, path)
        policy = self.policy
        root = self.resolve(path or self.config.workdir)
        real = (await self.stat(root)).realpath or root
        if not (is_within(root, policy.workspace_roots) and is_within(real, policy.workspace_roots)):
            raise OpError(
                "permission_denied",
                f"{root} is outside the workspace roots ({', '.join(policy.workspace_roots)}); "
                "pass include_secrets=True for the embedding program's own look",
            )
        found = await self._owner.diff(self, path)
        kept = []
        for change in found.changes:
            full = f"{found.root.rstrip('/')}/{change.path}"
            if is_secret(full, policy.secret_patterns, policy.secret_exceptions) is not None:
                continue
            # A file with other names may be a secret's under a harmless one: left out, as from copy_out.
            if change.change != "deleted" and (await self.stat(full, follow=False)).nlink > 1:
                continue
            kept.append(change)
        return found.model_copy(update={"changes": kept})

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
            await self._stop_egress()
            await self._owner.release(self, keep_for)
            await self.channel.aclose()

    async def close(self) -> None:
        """Remove the container. Safe to call twice; never raises for an already-dead session."""
        if self._closed:
            return
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._stop_egress()
            await self.channel.aclose()
            await self._owner.remove(self)
