"""What a route is given: the server's parts, the caller's principal (from its API key), its
tenant, and one of its live sessions, each resolved once per request by FastAPI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Query, Request

from caisson.runtime import Runtime
from caisson.server.approvals import Approvals
from caisson.server.audit_writer import DurableAudit
from caisson.server.auth import Forbidden, KeyChecker, Principal
from caisson.server.metrics import Metrics
from caisson.server.models import TenantInfo
from caisson.server.quotas import RateLimiter
from caisson.server.store import Store
from caisson.server.tenancy import Live, Tenancy


@dataclass
class ServerContext:
    runtime: Runtime
    store: Store
    keys: KeyChecker
    tenancy: Tenancy
    approvals: Approvals
    metrics: Metrics
    limiter: RateLimiter
    audit: DurableAudit


# Async: FastAPI runs a plain function dependency on a worker thread, a thread hop per request.
async def context(request: Request) -> ServerContext:
    ctx: ServerContext = request.app.state.caisson
    return ctx


Ctx = Annotated[ServerContext, Depends(context)]


async def principal(request: Request, ctx: Ctx) -> Principal:
    found = await ctx.keys.check(request.headers.get("authorization"))
    # The request log names who asked, whatever the answer.
    request.state.principal = found
    return found


async def admin(who: Annotated[Principal, Depends(principal)]) -> Principal:
    if who.scope != "admin":
        raise Forbidden("this needs an admin key")
    return who


async def tenant(who: Annotated[Principal, Depends(principal)], ctx: Ctx) -> TenantInfo:
    if who.tenant_id is None:
        raise Forbidden("an admin key manages tenants and keys; sessions need a tenant's key")
    found = await ctx.tenancy.tenant(who.tenant_id)
    if found is None:
        raise Forbidden("this key's tenant no longer exists")
    return found


async def viewed(
    who: Annotated[Principal, Depends(principal)], ctx: Ctx,
    tenant_id: Annotated[str | None, Query(max_length=64, description="admin keys: one tenant's only")] = None,
) -> str | None:
    """Whose records a list shows: a tenant key's own tenant's; an admin key's, every
    tenant's, or the one ``tenant_id`` names (a tenant key may not name another)."""
    if who.scope == "admin":
        return tenant_id
    own = (await tenant(who, ctx)).id
    if tenant_id is not None and tenant_id != own:
        raise Forbidden("a tenant key sees its own tenant only; leave tenant_id out")
    return own


Admin = Annotated[Principal, Depends(admin)]
# The tenant whose records a list shows; None: every tenant's (an admin key).
Viewed = Annotated[str | None, Depends(viewed)]
Tenant = Annotated[TenantInfo, Depends(tenant)]


async def live_session(session_id: str, request: Request) -> Live:
    """One of the caller's open sessions, after counting the operation against its quota. The
    key, tenant and session are resolved here in one dependency, not as a chain of them: this
    is every session operation's path, and FastAPI's solving costs CPU per dependency."""
    ctx = await context(request)
    who = await tenant(await principal(request, ctx), ctx)
    live = await ctx.tenancy.locate(who.id, session_id)
    ctx.limiter.take(who.id, who.quotas.calls_per_minute)
    return live


LiveSession = Annotated[Live, Depends(live_session)]
