"""Remote MCP at ``/mcp`` (the caisson profile) and ``/mcp/<profile>`` (any other): the stdio
server's tools (``caisson.mcp_tools``) over Streamable HTTP, authenticated by a
tenant's API key. Each MCP session (protocol revisions with the initialize handshake) gets
its own caisson session of that tenant and profile, opened on its first tool call within the
tenant's quotas (a profile they leave out is refused there) and with its approval queue, and
closed when the MCP session ends; an MCP session answers only the key that opened it.
Requests of the sessionless 2026-07-28 revision share one caisson session per API key and
profile."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST
from starlette.types import Receive, Scope, Send

from caisson.mcp_tools import SessionTools, tools_server
from caisson.profiles import PROFILES, Profile, get_profile
from caisson.server.auth import Principal, Unauthorized
from caisson.server.deps import ServerContext
from caisson.server.middleware import send_problem
from caisson.server.models import SessionBody
from caisson.server.quotas import QuotaExceeded
from caisson.server.tenancy import NotAllowed, NotFound
from caisson.session import Session

DEFAULT_PROFILE = "caisson"
STATE_KEY = "caisson.tools"


class RemoteMcp:
    def __init__(self, ctx: ServerContext) -> None:
        self._ctx = ctx
        self._by_key: dict[tuple[str, str], SessionTools] = {}
        self._managers = {name: self._manager(get_profile(name)) for name in PROFILES}

    def _manager(self, profile: Profile) -> StreamableHTTPSessionManager:
        return StreamableHTTPSessionManager(
            app=tools_server(profile, lambda ctx: self._tools_for(ctx, profile)),
            # Requests carry a bearer key a browser page cannot attach by itself.
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        """Serve while inside; then end every MCP session and the caisson sessions they hold."""
        try:
            async with AsyncExitStack() as stack:
                for manager in self._managers.values():
                    await stack.enter_async_context(manager.run())
                yield
        finally:
            with anyio.CancelScope(shield=True):
                for tools in self._by_key.values():
                    await tools.close()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        name = (scope.get("path_params") or {}).get("profile", DEFAULT_PROFILE)
        manager = self._managers.get(name)
        if manager is None:
            known = ", ".join(self._managers)
            await send_problem(send, 404, "no_such_profile", f"no profile {name!r}; known: {known}")
            return
        headers = dict(scope.get("headers") or [])
        try:
            who = await self._ctx.keys.check(headers.get(b"authorization", b"").decode("latin-1"))
            if who.tenant_id is None:
                raise Unauthorized("remote MCP needs a tenant's API key")
        except Unauthorized as exc:
            await send_problem(send, 401, "unauthorized", str(exc), [(b"www-authenticate", b"Bearer")])
            return
        scope.setdefault("state", {})["principal"] = who
        # The SDK binds an MCP session to the credential that opened it.
        scope["user"] = AuthenticatedUser(AccessToken(token=who.key_id, client_id=who.key_id, scopes=[]))
        await manager.handle_request(scope, receive, send)

    async def _tools_for(self, ctx: Any, profile: Profile) -> SessionTools:
        who: Principal = ctx.request.scope["state"]["principal"]
        tenant = await self._ctx.tenancy.tenant(who.tenant_id or "")
        if tenant is None:
            raise MCPError(INVALID_REQUEST, "this key's tenant no longer exists")
        try:
            self._ctx.limiter.take(tenant.id, tenant.quotas.calls_per_minute)
        except QuotaExceeded as exc:
            raise self._refused(tenant.id, exc) from None
        if ctx.request.headers.get("mcp-session-id") is None:
            # A 2026-07-28 request stands alone (no MCP session): the key's own session serves
            # it, until that session idles out or the tenant closes it through the API.
            tools = self._by_key.get((who.key_id, profile.name))
            if tools is None:
                tools = self._by_key[(who.key_id, profile.name)] = self._tools(who, profile)
            return tools
        # An MCP session: the SDK's place for per-connection state and clean-up, which lowlevel
        # handlers reach only through their request's session.
        connection = ctx.session._connection
        tools = connection.state.get(STATE_KEY)
        if tools is None:
            tools = connection.state[STATE_KEY] = self._tools(who, profile)
            connection.exit_stack.push_async_callback(tools.close)
        return tools

    def _tools(self, who: Principal, profile: Profile) -> SessionTools:
        return SessionTools(
            profile, lambda: self._open(who, profile.name), self._close_for(who), observe=self._ctx.metrics.call
        )

    async def _open(self, who: Principal, profile: str) -> Session:
        assert who.tenant_id is not None
        tenant = await self._ctx.tenancy.tenant(who.tenant_id)
        if tenant is None:
            raise Unauthorized("this key's tenant no longer exists")
        body = SessionBody(profile=profile, ttl=8 * 3600, idle_timeout=3600)
        try:
            [live] = await self._ctx.tenancy.open(tenant, body, self._ctx.approvals.handler(tenant.id))
        except NotAllowed as exc:
            raise MCPError(INVALID_REQUEST, str(exc)) from None
        except QuotaExceeded as exc:
            raise self._refused(tenant.id, exc) from None
        return live.session

    def _refused(self, tenant_id: str, exc: QuotaExceeded) -> MCPError:
        """A quota refusal as MCP tells it (counted like the API's)."""
        self._ctx.metrics.quota_refusals.labels(tenant_id, exc.quota).inc()
        return MCPError(INVALID_REQUEST, f"{exc} (retry after {exc.retry_after} s)")

    def _close_for(self, who: Principal) -> Any:
        async def close(session: Session) -> None:
            assert who.tenant_id is not None
            try:
                await self._ctx.tenancy.close(self._ctx.tenancy.live(who.tenant_id, session.id))
            except NotFound:  # closed through the API already
                await session.close()

        return close
