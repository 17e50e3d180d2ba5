"""Running ``caisson serve``: one Runtime, the store, the app under uvicorn, and the
background work (the store's writer, sweeps, the heartbeat), all ended together; every session the server
opened is closed when it stops."""

from __future__ import annotations

import contextlib
import secrets
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from types import FrameType

import anyio
import uvicorn
from fastapi import FastAPI

from caisson.config import RuntimeConfig, owner_alive
from caisson.logs import get_logger
from caisson.policy import Policy
from caisson.runtime import Runtime
from caisson.server import auth
from caisson.server.app import create_app
from caisson.server.approvals import Approvals
from caisson.server.audit_writer import DurableAudit
from caisson.server.deps import ServerContext
from caisson.server.mcp_remote import RemoteMcp
from caisson.server.metrics import Metrics
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
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Idle keep-alive connections are closed by the client first (httpx's expiry is 5 s, uvicorn's
# own default too): a server closing one just as a client sends on it made that call fail.
KEEP_ALIVE = 30


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
        config = RuntimeConfig(egress_hosts=self.settings.egress_hosts)
        if self.settings.state_dir:
            config = config.model_copy(update={"state_dir": self.settings.state_dir})
        async with Runtime(config) as rt:
            store = Store(database_url(self.settings.db, rt.config.state_dir))
            policy = Policy.from_env()
            policy = policy.model_copy(update={"approval_timeout": self.settings.approval_timeout + POLICY_TIMEOUT_MARGIN})
            # The owner part tells a live process from a gone one; the suffix tells replicas
            # apart even within one process.
            server = f"{rt.config.owner}/{secrets.token_hex(4)}"
            tenancy = Tenancy(rt, store, policy, self.settings.image, server=server)
            audit = DurableAudit(store, self.settings.request_log_days, fallback=lambda: rt.audit)
            try:
                await store.beat(server)
                if self.settings.new_admin_key or not await store.has_admin_key():
                    label = "asked for at start" if self.settings.new_admin_key else "made at first start"
                    self.admin_token = (await auth.create_key(store, "admin", None, label)).token
                ctx = ServerContext(
                    runtime=rt, store=store, keys=auth.KeyChecker(store), tenancy=tenancy,
                    approvals=Approvals(store, self.settings.approval_timeout),
                    metrics=Metrics(tenancy.counts, tenancy.egress_totals), limiter=RateLimiter(),
                    audit=audit,
                )
                rt.audit_to(ctx.audit)
                await self._take_over(ctx)
                if self.settings.mcp:
                    mcp = RemoteMcp(ctx)
                    async with mcp.run():
                        await self._serve(create_app(ctx, self.settings, mcp), ctx, on_ready)
                else:
                    await self._serve(create_app(ctx, self.settings), ctx, on_ready)
            finally:
                with anyio.CancelScope(shield=True):
                    if self.settings.on_stop == "hand-over":
                        await tenancy.hand_over(self.settings.hand_over_for)
                        await store.hand_over(server)
                    else:
                        await tenancy.close_all()
                        await store.leave(server)
                    # What the sessions recorded as they closed or detached (their egress
                    # connections, cut then) after the writer's last commit.
                    await audit.close()
                    store.close()

    @staticmethod
    async def _take_over(ctx: ServerContext) -> None:
        """Sessions of replicas that are gone (this one's previous process, one killed) live
        on here if their containers do; the others are closed."""
        tenancy = ctx.tenancy
        orphans = await ctx.store.take_over_from_gone(_replica_alive, time.time() - SILENT_AFTER, tenancy.server, tenancy.url)
        if not orphans:
            return
        kept = 0
        for info, config in orphans:
            kept += await tenancy.take_over(info, config, ctx.approvals.handler(info.tenant_id))
        log.info("sessions of replicas that are gone taken over", kept=kept, closed=len(orphans) - kept)

    @classmethod
    async def _beat(cls, ctx: ServerContext) -> None:
        if not await ctx.store.beat(ctx.tenancy.server):
            # Silent too long (cut off from the database): the others have taken over or
            # closed this replica's sessions and given their seats away, so they end here.
            log.warning("this replica was taken for gone; letting its sessions go")
            await ctx.tenancy.let_go()
        await cls._take_over(ctx)

    async def _serve(self, app: FastAPI, ctx: ServerContext, on_ready: Callable[[Hosted], None] | None) -> None:
        s = self.settings
        server = self._server = _Server(uvicorn.Config(
            app, host=s.host, port=s.port, log_level=s.log_level, lifespan="off", http="httptools",
            timeout_keep_alive=KEEP_ALIVE,
            ssl_certfile=s.ssl_certfile, ssl_keyfile=s.ssl_keyfile, timeout_graceful_shutdown=s.drain,
        ))
        async with anyio.create_task_group() as tg:
            tg.start_soon(ctx.audit.run)
            tg.start_soon(_every, SWEEP_EVERY, ctx.tenancy.sweep, "sweeping ended sessions")
            tg.start_soon(_every, 1.0, ctx.tenancy.watch_deaths, "watching the engine's events")
            tg.start_soon(_every, BEAT_EVERY, lambda: self._beat(ctx), "the replica's heartbeat")

            async def announce() -> None:
                while not server.started:
                    if server.should_exit:
                        return
                    await anyio.sleep(0.02)
                host, port = server.servers[0].sockets[0].getsockname()[:2]
                scheme = "https" if s.ssl_certfile else "http"
                self.url = f"{scheme}://{host if ':' not in host else f'[{host}]'}:{port}"
                ctx.tenancy.url = s.public_url or self.url
                await ctx.store.set_home_url(ctx.tenancy.server, ctx.tenancy.url)
                log.info("serving", url=self.url)
                if on_ready is not None:
                    on_ready(self)

            tg.start_soon(announce)
            await server.serve()
            tg.cancel_scope.cancel()


class _Server(uvicorn.Server):
    """uvicorn's server, but a stop signal only starts the drain: uvicorn re-raises the
    signal it caught once it has shut down, which killed the process (exit 143 on SIGTERM)
    before the sessions were closed and the store told."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = {sig: signal.signal(sig, self._stop) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _stop(self, sig: int, _frame: FrameType | None) -> None:
        # A second signal: stop waiting for the calls still running.
        self.force_exit = self.should_exit
        self.should_exit = True
        log.info("stopping", signal=signal.Signals(sig).name, draining=not self.force_exit)


def _replica_alive(name: str) -> bool:
    """A replica on this host is alive while its process is; one elsewhere is presumed so
    (only its heartbeat can tell)."""
    return owner_alive(name.split("/")[0])


async def _every(seconds: float, work: Callable[[], Awaitable[None]], what: str) -> None:
    while True:
        await anyio.sleep(seconds)
        try:
            await work()
        except Exception:  # the engine or the database may be briefly away: next time
            log.exception(f"{what} failed")
