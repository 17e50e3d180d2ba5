"""Which tenant owns what. The live sessions of the server, each bound to its tenant; another
tenant's id is answered exactly like an id that does not exist (404), and the attempt is
noted in the request log. Opening a session checks the tenant's allowances first."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field

import anyio

from caisson.client.models import Confinement
from caisson.client.primitives import SandboxClient
from caisson.config import SessionConfig
from caisson.egress import EgressStats
from caisson.errors import CaissonError, SessionError
from caisson.logs import get_logger
from caisson.policy import ApprovalHandler, Policy
from caisson.policy.environment import environment_reasons
from caisson.runtime import Runtime
from caisson.server.models import SessionBody, SessionInfo, SnapshotInfo, TenantInfo
from caisson.server.quotas import QuotaExceeded, check_size, check_snapshot_disk
from caisson.server.store import CLOSED_ON_REQUEST, Store
from caisson.session import Session

log = get_logger("caisson.server")

TENANT_CACHE_SECONDS = 5.0
MAX_ENDED_KEPT = 10_000


class NotFound(Exception):
    """Answered 404. ``foreign``: the id exists but is another tenant's (audited)."""

    def __init__(self, kind: str, ident: str, *, foreign: bool = False) -> None:
        super().__init__(f"no {kind} {ident!r} here")
        self.kind = kind
        self.foreign = foreign


class Elsewhere(Exception):
    """The session is open on another replica of this control plane (421, with its address)."""

    def __init__(self, session_id: str, url: str | None) -> None:
        where = f"the replica at {url}" if url else "another replica"
        super().__init__(f"session {session_id!r} is served by {where}: send its requests there")
        self.url = url


class Gone(Exception):
    """A session this replica saw end by itself (its container died, TTL, idle timeout): 410."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id!r} ended: {reason}; open a new one")


class NotAllowed(Exception):
    """A request outside the tenant's allowances that waiting will not cure (403)."""


class EnvRefused(Exception):
    """A session's env that would change what every later command runs or loads (422)."""


@dataclass
class Live:
    session: Session
    info: SessionInfo
    # File primitives run as the agent user beneath the session's workspace roots (the daemon
    # refuses paths that resolve elsewhere); commands are decided by the policy (routes_commands).
    agent: SandboxClient = field(init=False)

    def __post_init__(self) -> None:
        cfg = self.session.config
        self.agent = self.session.confined(Confinement(
            user=cfg.agent_user, roots=tuple(self.session.policy.workspace_roots), level="dangerous",
            network=cfg.network, egress_port=cfg.egress_port,
        ))


class Tenancy:
    def __init__(
        self, rt: Runtime, store: Store, policy: Policy, default_image: str | None = None, *, server: str = ""
    ) -> None:
        """``server``: this replica's name in the store; ``url`` (set once listening): its address."""
        self.server = server
        self.url: str | None = None
        self._rt = rt
        self._default_image = default_image
        self._store = store
        self._policy = policy
        self._live: dict[str, Live] = {}
        self._tenants: dict[str, tuple[float, TenantInfo]] = {}
        # Egress of the tenants' closed sessions, so the metrics' counters never go down.
        self._egress_closed: dict[str, EgressStats] = {}
        # Sessions that ended by themselves here, recent first out: (tenant, why) for a 410.
        self._ended: dict[str, tuple[str, str]] = {}
        # One snapshot at a time per tenant: parallel ones must not all pass the disk check.
        self._snapshotting: dict[str, anyio.Lock] = {}
        # The engine's deaths are read from here on: from this server's start, then from the
        # last one seen, so a watcher started late or again after an error misses none.
        self._deaths_since = time.time()

    # ---- look-ups -----------------------------------------------------------------------

    async def tenant(self, tenant_id: str) -> TenantInfo | None:
        """The tenant and its quotas, read from the store at most every few seconds: every
        request needs them, and a quota change may take that long to apply."""
        cached = self._tenants.get(tenant_id)
        if cached is not None and time.monotonic() - cached[0] < TENANT_CACHE_SECONDS:
            return cached[1]
        found = await self._store.tenant(tenant_id)
        if found is not None:
            self._tenants[tenant_id] = (time.monotonic(), found)
        return found

    def forget_tenant(self, tenant_id: str) -> None:
        self._tenants.pop(tenant_id, None)

    def live(self, tenant_id: str, session_id: str) -> Live:
        found = self._live.get(session_id)
        if found is None or found.info.tenant_id != tenant_id:
            raise NotFound("session", session_id, foreign=found is not None)
        return found

    async def locate(self, tenant_id: str, session_id: str) -> Live:
        """One of the tenant's open sessions held here; one held by another replica sharing
        the store raises Elsewhere (so the client can go there), anything else NotFound."""
        if session_id in self._live:
            return self.live(tenant_id, session_id)
        ended = self._ended.get(session_id)
        if ended is not None and ended[0] == tenant_id:
            raise Gone(session_id, ended[1])
        found = await self._store.session_and_home(session_id)
        if found is None:
            raise NotFound("session", session_id)
        info, server, url = found
        if info.tenant_id != tenant_id:
            raise NotFound("session", session_id, foreign=True)
        if info.state == "open" and server is not None and server != self.server:
            raise Elsewhere(session_id, url)
        raise NotFound("session", session_id)

    async def record(self, tenant_id: str, session_id: str) -> SessionInfo:
        """A session of the tenant's, open or closed."""
        info = await self._store.session(session_id)
        if info is None or info.tenant_id != tenant_id:
            raise NotFound("session", session_id, foreign=info is not None)
        return info

    async def snapshot_ref(self, tenant_id: str, snapshot_id: str) -> str:
        found = await self._store.snapshot(snapshot_id)
        if found is None or found[0].tenant_id != tenant_id:
            raise NotFound("snapshot", snapshot_id, foreign=found is not None)
        return found[1]

    def counts(self) -> dict[str, int]:
        """Open sessions per tenant."""
        counts: dict[str, int] = {}
        for live in self._live.values():
            counts[live.info.tenant_id] = counts.get(live.info.tenant_id, 0) + 1
        return counts

    def egress_totals(self) -> dict[str, EgressStats]:
        """Egress per tenant, closed sessions and open ones."""
        totals: dict[str, EgressStats] = {}
        for tenant, done in self._egress_closed.items():
            _add_egress(totals.setdefault(tenant, EgressStats()), done)
        for live in self._live.values():
            if live.session.egress_stats is not None:
                _add_egress(totals.setdefault(live.info.tenant_id, EgressStats()), live.session.egress_stats)
        return totals

    # ---- lifecycle ----------------------------------------------------------------------

    async def open(self, tenant: TenantInfo, body: SessionBody, approvals: ApprovalHandler, n: int = 1) -> list[Live]:
        """Open ``n`` sessions as ``body`` says, within the tenant's allowances."""
        quotas = tenant.quotas
        if quotas.profiles is not None and body.profile not in quotas.profiles:
            raise NotAllowed(f"profile {body.profile!r} is not allowed for this tenant; allowed: {quotas.profiles}")
        image = body.image
        if body.from_snapshot is not None:
            image = await self.snapshot_ref(tenant.id, body.from_snapshot)
        elif image is not None and image not in (quotas.images or []):
            raise NotAllowed(f"image {image!r} is not allowed for this tenant; allowed: {quotas.images or 'the default image'}")
        if body.gvisor and quotas.gvisor == "never":
            raise NotAllowed("gVisor is not offered to this tenant; open the session without it")
        if body.network and not quotas.network:
            raise NotAllowed("network is not allowed for this tenant; open the session without it")
        beyond = [e for e in body.egress if e.strip().lower() not in {q.strip().lower() for q in quotas.egress}]
        if beyond:
            raise NotAllowed(f"egress to {beyond} is not allowed for this tenant; allowed: {quotas.egress or 'none'}")
        # The session's env goes with every command, safe ones included: decided as a call's env is.
        refused = [(name, why) for name, why in environment_reasons(body.env) if name not in quotas.start_env]
        if refused:
            raise EnvRefused(
                "; ".join(why.replace("env sets", "the session's env sets", 1) for _, why in refused)
                + f" ({', '.join(name for name, _ in refused)}): it would apply to every command of the session, "
                "the ones the policy lets run unasked included. Open the session without it and give it to the "
                "commands that need it (a call's env is decided call by call, asking the tenant's approvers), "
                "or ask the operator to allow the name in the tenant's quotas (start_env)"
            )
        memory = body.limits.memory or quotas.max_memory
        check_size("memory", quotas.max_memory, memory)
        disk = body.limits.disk or quotas.max_disk
        check_size("disk", quotas.max_disk, disk)
        limits = {k: v for k, v in body.limits.model_dump().items() if v is not None} | {"memory": memory, "disk": disk}
        config = SessionConfig.model_validate({
            "image": image or self._default_image, "profile": body.profile, "tenant": tenant.id, "ttl": body.ttl,
            "idle_timeout": body.idle_timeout, "env": body.env, "limits": limits,
            "gvisor": body.gvisor or quotas.gvisor == "always", "network": body.network,
            "egress": body.egress,
        })
        # Seats are reserved in the store, so every replica sharing it counts, and two
        # replicas opening the tenant's last seat at once cannot both have it.
        seats, held = await self._store.reserve_seats(tenant.id, n, quotas.max_sessions, self.server, body.profile, memory)
        if not seats:
            raise QuotaExceeded(
                "sessions",
                f"this tenant may have {quotas.max_sessions} sessions open at once and has {held}; close one first",
                retry_after=30,
            )
        opened: list[Live] = []
        try:
            for seat in seats:
                session = await self._rt.open_session(config, policy=self._policy, approval_handler=approvals)
                info = SessionInfo(
                    id=session.id, tenant_id=tenant.id, image=body.image if body.from_snapshot is None else body.from_snapshot,
                    profile=body.profile, memory=memory, state="open", created=time.time(),
                )
                live = Live(session=session, info=info)
                self._live[session.id] = live
                opened.append(live)
                await self._store.fill_seat(seat, info, self.server, self.url, config.model_dump_json())
        except BaseException:
            with anyio.CancelScope(shield=True):
                for live in opened:
                    await self.close(live)
                await self._store.release_seats(seats)
            raise
        log.info("sessions opened", tenant=tenant.id, sessions=[o.info.id for o in opened])
        return opened

    async def take_over(self, info: SessionInfo, config: str | None, approvals: ApprovalHandler) -> bool:
        """Re-attach a session a gone replica held (its container may outlive it, with its
        background tasks and their output); one whose container is gone is closed. Whether
        it lives on here."""
        try:
            session = await self._rt.reattach(
                info.id, SessionConfig.model_validate_json(config) if config else None,
                tenant=info.tenant_id, policy=self._policy, approval_handler=approvals,
            )
        except CaissonError as exc:
            log.info("a session of a gone replica did not outlive it", session=info.id, error=str(exc))
            await self._store.close_session(info.id, f"its container did not outlive its server: {exc}")
            return False
        self._live[info.id] = Live(session=session, info=info)
        return True

    async def close(self, live: Live, reason: str = CLOSED_ON_REQUEST) -> None:
        self._live.pop(live.info.id, None)
        with anyio.CancelScope(shield=True):
            await live.session.close()
            if live.session.egress_stats is not None:
                _add_egress(self._egress_closed.setdefault(live.info.tenant_id, EgressStats()), live.session.egress_stats)
            await self._store.close_session(live.info.id, reason)

    async def let_go(self) -> None:
        """This replica was taken for gone: a session another replica took over is its now
        (left running), the others end."""
        for live in list(self._live.values()):
            found = await self._store.session_and_home(live.info.id)
            if found is not None and found[0].state == "open" and found[1] != self.server:
                self._live.pop(live.info.id, None)
                await live.session.detach()
            else:
                await self.close(live)

    async def hand_over(self, keep_for: float) -> None:
        """Leave every session running, still open in the registry, for ``keep_for`` seconds:
        the next replica to start or beat takes them over."""
        async with anyio.create_task_group() as tg:
            for live in list(self._live.values()):
                self._live.pop(live.info.id, None)
                tg.start_soon(live.session.detach, keep_for)

    async def close_all(self) -> None:
        async with anyio.create_task_group() as tg:
            for live in list(self._live.values()):
                tg.start_soon(self.close, live)

    async def snapshot(self, live: Live) -> SnapshotInfo:
        """Refused when it would take the tenant's snapshots past their disk quota: what the
        session's layer holds now is what the engine will copy (sparse files expanded)."""
        async with self._snapshotting.setdefault(live.info.tenant_id, anyio.Lock()):
            tenant = await self.tenant(live.info.tenant_id)
            if tenant is not None:
                held = sum([await self._rt.backend.snapshot_bytes(ref) for ref in await self._store.snapshot_refs(tenant.id)])
                adding = await self._rt.backend.layer_bytes(live.session.container_id)
                check_snapshot_disk(tenant.quotas, held, adding)
            ref = await self._rt.snapshot(live.session)
            info = SnapshotInfo(
                id="snap-" + secrets.token_hex(8), tenant_id=live.info.tenant_id, session_id=live.info.id, created=time.time()
            )
            await self._store.add_snapshot(info, ref)
            return info

    async def sweep(self) -> None:
        """Close sessions whose container is gone (TTL, idle timeout, killed). The engine is
        asked, not the daemons: a ping would count as activity and keep idle sessions alive."""
        # Paused is alive: a snapshot pauses the container while the engine commits it.
        running = {row.session_id for row in await self._rt.backend.list_sandboxes() if row.state in ("running", "paused")}
        for live in list(self._live.values()):
            if live.info.id not in running and live.info.id in self._live:
                await self.dead(live, SessionError("its container is no longer running"))

    async def dead(self, live: Live, error: CaissonError) -> None:
        """A session whose container is gone (TTL, idle timeout, killed) leaves the registry."""
        log.warning("session ended", session=live.info.id, error=str(error))
        self._ended[live.info.id] = (live.info.tenant_id, str(error))
        if len(self._ended) > MAX_ENDED_KEPT:
            del self._ended[next(iter(self._ended))]
        await self.close(live, str(error))

    async def watch_deaths(self) -> None:
        """The engine's event stream: a session whose container dies leaves at once (its calls
        answer 410, its seat is free), not at the next sweep."""
        async def died(session_id: str, why: str, when: float) -> None:
            self._deaths_since = max(self._deaths_since, when)
            live = self._live.get(session_id)
            if live is not None:
                await self.dead(live, SessionError(why))

        await self._rt.backend.watch_deaths(died, self._deaths_since)


def _add_egress(total: EgressStats, more: EgressStats) -> None:
    total.connections.update(more.connections)
    total.bytes_in += more.bytes_in
    total.bytes_out += more.bytes_out
