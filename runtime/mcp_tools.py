"""A session's tools as Model Context Protocol handlers, on the official MCP SDK: one
(replaceable) session of a profile, its tools listed and called, progress reported while a
call runs. Served over stdio or HTTP by ``caisson mcp`` (``interfaces/mcp_server.py``) and
per connection by ``caisson serve`` (``server/mcp_remote.py``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from caisson.errors import CaissonError
from caisson.logs import get_logger
from caisson.profiles.base import Profile
from caisson.profiles.export import export_tools, prompt_text
from caisson.session import Session
from caisson.tools.base import ToolResult

log = get_logger("caisson.mcp")

# Protocol revisions before this one have no structuredContent in tool results.
STRUCTURED_CONTENT_SINCE = "2025-06-18"
# How long a daemon may take to answer the liveness probe before its session counts as dead.
PROBE_TIMEOUT = 5.0
# Seconds between progress notifications of a long call.
PROGRESS_INTERVAL = 5.0


def _version() -> str:
    try:
        return metadata.version("caisson-runtime")
    except metadata.PackageNotFoundError:
        return "0+unknown"


Opener = Callable[[], Awaitable[Session]]
Closer = Callable[[Session], Awaitable[None]]


def tools_server(profile: Profile, tools_for: Callable[[Any], Awaitable[SessionTools]]) -> Server[Any]:
    """An MCP server of ``profile``'s tools; ``tools_for(ctx)`` names the session a request's
    calls run in (one for the stdio server, one per MCP connection for ``caisson serve``)."""
    listed = types.ListToolsResult(tools=[
        types.Tool(name=t["name"], description=t.get("description"), input_schema=t["inputSchema"])
        for t in export_tools(profile, "mcp")
    ])

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return listed

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await (await tools_for(ctx)).call_tool(ctx, params)

    return Server(
        "caisson", version=_version(), instructions=prompt_text(profile), on_list_tools=list_tools, on_call_tool=call_tool
    )


class SessionTools:
    """The tools of one (replaceable) session of ``profile``, as MCP handlers; sessions are
    opened and closed by the given functions."""

    def __init__(
        self, profile: Profile, open_session: Opener, close_session: Closer | None = None,
        observe: Callable[[ToolResult, float], None] | None = None,
    ) -> None:
        self._profile = profile
        self._open = open_session
        self._close = close_session or (lambda s: s.close())
        # Told of every call's result and seconds (caisson serve's metrics).
        self._observe = observe
        self._session: Session | None = None
        self._lock = anyio.Lock()

    def server(self) -> Server[Any]:
        async def me(ctx: Any) -> SessionTools:
            return self

        return tools_server(self._profile, me)

    async def close(self) -> None:
        async with self._lock:
            if self._session is not None:
                await self._close(self._session)
                self._session = None

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        if self._profile.lookup(params.name) is None:
            # A protocol error, as the specification lists unknown tools.
            offered = ", ".join(sorted(self._profile.tools))
            raise MCPError(types.INVALID_PARAMS, f"unknown tool: {params.name}; this server offers {offered}")
        session, notice = await self.current()
        async with anyio.create_task_group() as tg:
            tg.start_soon(_report_progress, ctx)
            started = time.perf_counter()
            result = await session.call(params.name, dict(params.arguments or {}))
            tg.cancel_scope.cancel()
        if self._observe is not None:
            self._observe(result, time.perf_counter() - started)
        text = f"{notice}\n\n{result.text}" if notice else result.text
        structured = (
            result.data
            if isinstance(result.data, dict) and str(getattr(ctx, "protocol_version", "")) >= STRUCTURED_CONTENT_SINCE
            else None
        )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=not result.ok, structured_content=structured
        )

    async def current(self) -> tuple[Session, str | None]:
        """The live session, started on first use; a dead one is replaced, with a notice."""
        async with self._lock:
            notice = None
            if self._session is not None and not await _responds(self._session):
                failure = self._session.channel.failure
                notice = (
                    f"[caisson: the previous sandbox session ended ({failure}); "
                    "this call ran in a new session with a fresh workspace]"
                )
                log.warning("session ended; starting a new one", session=self._session.id, error=str(failure))
                await self._close(self._session)
                self._session = None
            if self._session is None:
                self._session = await self._open()
                log.info("session started", session=self._session.id, profile=self._profile.name)
            return self._session, notice

    async def warm_up(self) -> None:
        try:
            await self.current()
        except CaissonError as exc:
            # The first tools/call tries again and reports the error to the client.
            log.warning("could not start the session", error=str(exc))


async def _report_progress(ctx: Any) -> None:
    """While a call runs, tell a client that asked for progress that it still does, so a
    client with a request timeout keeps waiting (a no-op for clients that did not ask)."""
    started = anyio.current_time()
    while True:
        await anyio.sleep(PROGRESS_INTERVAL)
        elapsed = anyio.current_time() - started
        with contextlib.suppress(Exception):  # progress is a courtesy: never fail the call over it
            await ctx.session.report_progress(elapsed, None, f"still running after {elapsed:.0f} s")


async def _responds(session: Session) -> bool:
    """Whether the session's daemon still answers: nothing reads the channel between calls,
    so a container that died shows only when asked."""
    if session.closed:
        return False
    try:
        await session.ping(timeout=PROBE_TIMEOUT)
    except CaissonError:
        return False
    return True
