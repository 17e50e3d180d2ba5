"""Running ``caisson serve``: one Runtime, the store, the app under uvicorn, and the
background work (the request log's writer), all ended together; every session the server
opened is closed when it stops."""

from __future__ import annotations

import secrets
import time
from collections.abc import Awaitable, Callable

import anyio
import uvicorn
from fastapi import FastAPI

from caisson.config import RuntimeConfig
from caisson.docker import reaper
from caisson.logs import get_logger
from caisson.policy import Policy
from caisson.runtime import Runtime
from caisson.server import auth
from caisson.server.app import create_app
from caisson.server.approvals import Approvals
from caisson.server.deps import ServerContext
from caisson.server.mcp_remote import RemoteMcp
from caisson.server.metrics import Metrics
from caisson.server.middleware import RequestLog
from caisson.server.quotas import RateLimiter
from caisson.server.settings import ServeSettings
from caisson.server.store import Store, database_url
from caisson.server.tenancy import Tenancy

log = get_logger("caisson.server")

# The policy's own approval deadline stays behind the queue's, so the queue's answer (and
# its record in the store) is always the one that counts.
POLICY_TIMEOUT_MARGIN = 10.0
# Seconds between looks for sessions whose container ended on its own.
SWEEP_EVERY = 30.0
# A replica says it is alive this often; one silent for SILENT_AFTER is gone, and the
# sessions it held are marked closed by whichever replica notices first.
BEAT_EVERY = 10.0
SILENT_AFTER = 60.0


class Hosted:
    """``await Hosted(settings).run()`` serves until ``stop()`` (or a signal, on the main thread)."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.url: str | None = None
        # Set when an admin key was made at start (none in the store, or asked for): shown once.
        self.admin_token: str | None = None
        self._server: uvicorn.Server | None = None

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True

    async def run(self, on_ready: Callable[[Hosted], None] | None = None) -> None:
        config = RuntimeConfig(state_dir=self.settings.state_dir) if self.settings.state_dir else RuntimeConfig()
        async with Runtime(config) as rt:
            store = Store(database_url(self.settings.db, rt.config.state_dir))
            policy = Policy.from_env()
            policy = policy.model_copy(update={"approval_timeout": self.settings.approval_timeout + POLICY_TIMEOUT_MARGIN})
            # The owner part tells a live process from a gone one; the suffix tells replicas
            # apart even within one process.
            server = f"{rt.config.owner}/{secrets.token_hex(4)}"
            tenancy = Tenancy(rt, store, policy, self.settings.image, server=server)
            try:
                await self._close_sessions_of_gone(store)
                await store.beat(server)
                if self.settings.new_admin_key or not await store.has_admin_key():
                    label = "asked for at start" if self.settings.new_admin_key else "made at first start"
                    self.admin_token = (await auth.create_key(store, "admin", None, label)).token
                ctx = ServerContext(
                    runtime=rt, store=store, keys=auth.KeyChecker(store), tenancy=tenancy,
                    approvals=Approvals(store, self.settings.approval_timeout),
                    metrics=Metrics(tenancy.counts), limiter=RateLimiter(), requests=RequestLog(store, self.settings.request_log_days),
                )
                if self.settings.mcp:
                    mcp = RemoteMcp(ctx)
                    async with mcp.run():
                        await self._serve(create_app(ctx, self.settings, mcp), ctx, on_ready)
                else:
                    await self._serve(create_app(ctx, self.settings), ctx, on_ready)
            finally:
                with anyio.CancelScope(shield=True):
                    await tenancy.close_all()
                    await store.leave(server)
                    store.close()

    @staticmethod
    async def _close_sessions_of_gone(store: Store) -> None:
        if stale := await store.close_sessions_of_gone(_replica_alive, time.time() - SILENT_AFTER):
            log.info("sessions of replicas that are gone marked closed", sessions=stale)

    @classmethod
    async def _beat(cls, tenancy: Tenancy, store: Store) -> None:
        if not await store.beat(tenancy.server):
            # Silent too long (cut off from the database): the others have marked this
            # replica's sessions closed and given their seats away, so they end here too.
            log.warning("this replica was taken for gone; closing its sessions")
            await tenancy.close_all()
        await cls._close_sessions_of_gone(store)

    async def _serve(self, app: FastAPI, ctx: ServerContext, on_ready: Callable[[Hosted], None] | None) -> None:
        s = self.settings
        server = self._server = uvicorn.Server(uvicorn.Config(
            app, host=s.host, port=s.port, log_level=s.log_level, lifespan="off",
            ssl_certfile=s.ssl_certfile, ssl_keyfile=s.ssl_keyfile, timeout_graceful_shutdown=5,
        ))
        async with anyio.create_task_group() as tg:
            tg.start_soon(ctx.requests.run)
            tg.start_soon(_every, SWEEP_EVERY, ctx.tenancy.sweep, "sweeping ended sessions")
            tg.start_soon(_every, BEAT_EVERY, lambda: self._beat(ctx.tenancy, ctx.store), "the replica's heartbeat")

            async def announce() -> None:
                while not server.started:
                    if server.should_exit:
                        return
                    await anyio.sleep(0.02)
                host, port = server.servers[0].sockets[0].getsockname()[:2]
                scheme = "https" if s.ssl_certfile else "http"
                self.url = f"{scheme}://{host if ':' not in host else f'[{host}]'}:{port}"
                ctx.tenancy.url = s.public_url or self.url
                log.info("serving", url=self.url)
                if on_ready is not None:
                    on_ready(self)

            tg.start_soon(announce)
            await server.serve()
            tg.cancel_scope.cancel()


def _replica_alive(name: str) -> bool:
    """A replica on this host is alive while its process is; one elsewhere is presumed so
    (only its heartbeat can tell)."""
    return reaper.owner_alive(name.split("/")[0])


async def _every(seconds: float, work: Callable[[], Awaitable[None]], what: str) -> None:
    while True:
        await anyio.sleep(seconds)
        try:
            await work()
        except Exception:  # the engine or the database may be briefly away: next time
            log.exception(f"{what} failed")
