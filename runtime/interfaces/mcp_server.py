"""`caisson mcp`: one session's tools served to a Model Context Protocol client, on the
official MCP SDK, over stdio (the default) or Streamable HTTP (``--http HOST:PORT``).

The session's container starts as the server starts, so ``initialize`` answers at once and
the first call finds it ready. The SDK runs requests concurrently and cancels a call's
handler on ``notifications/cancelled``; a session whose container died (TTL, idle timeout,
killed) is replaced on the next call, and the agent is told its workspace is fresh.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from mcp.server.stdio import stdio_server

from caisson.config import SessionConfig
from caisson.errors import CaissonError
from caisson.logs import get_logger
from caisson.mcp_tools import SessionTools
from caisson.policy import Level, Policy
from caisson.profiles import get_profile
from caisson.runtime import Runtime

log = get_logger("caisson.mcp")


def load_policy(policy_file: str | None, approve_all: bool) -> Policy:
    try:
        policy = Policy.from_env(Policy.load(policy_file) if policy_file else None)
    except (OSError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
        raise CaissonError(f"cannot load the policy {policy_file or '(from the environment)'}: {exc}") from None
    return policy.model_copy(update={"auto_approve": Level.DANGEROUS}) if approve_all else policy


@asynccontextmanager
async def _serving(profile: str, policy_file: str | None, approve_all: bool, config: SessionConfig) -> AsyncIterator[
    tuple[SessionTools, anyio.abc.TaskGroup]
]:
    """A Runtime, the tools, a task group that stops on SIGTERM/SIGINT/SIGHUP; leaving it
    removes the session's container."""
    tools_profile = get_profile(profile)
    policy = load_policy(policy_file, approve_all)
    config = config.model_copy(update={"profile": tools_profile.name})
    async with Runtime() as rt, anyio.create_task_group() as tg:
        tools = SessionTools(tools_profile, lambda: rt.open_session(config, policy=policy))
        tg.start_soon(_stop_on_signal, tg.cancel_scope)
        tg.start_soon(tools.warm_up)
        yield tools, tg
        tg.cancel_scope.cancel()


async def _stop_on_signal(scope: anyio.CancelScope) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            log.info("stopping", signal=signal.Signals(signum).name)
            scope.cancel()
            return


async def serve_stdio(*, profile: str, policy_file: str | None, approve_all: bool, config: SessionConfig) -> None:
    """Serve on this process's stdin and stdout until EOF or a signal. While serving, the SDK
    points fd 1 at stderr, so a stray print cannot corrupt the protocol stream."""
    async with _serving(profile, policy_file, approve_all, config) as (tools, _), stdio_server() as (read, write):
        server = tools.server()
        await server.run(read, write, server.create_initialization_options())


async def serve_http(
    *, host: str, port: int, profile: str, policy_file: str | None, approve_all: bool, config: SessionConfig
) -> None:
    """Serve over Streamable HTTP at ``http://host:port/mcp`` until a signal."""
    import uvicorn

    async with _serving(profile, policy_file, approve_all, config) as (tools, tg):
        app = tools.server().streamable_http_app(host=host)
        server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on"))
        tg.start_soon(server.serve)
        await anyio.sleep_forever()
