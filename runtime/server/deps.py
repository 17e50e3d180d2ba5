"""What a route is given: the server's parts, the caller's principal (from its API key), its
tenant, and one of its live sessions, each resolved once per request by FastAPI."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from caisson.runtime import Runtime
from caisson.server.approvals import Approvals
from caisson.server.auth import Forbidden, KeyChecker, Principal
from caisson.server.metrics import Metrics
from caisson.server.middleware import RequestLog
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
    requests: RequestLog


def context(request: Request) -> ServerContext:
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


Admin = Annotated[Principal, Depends(admin)]
Tenant = Annotated[TenantInfo, Depends(tenant)]


async def live_session(session_id: str, who: Tenant, ctx: Ctx) -> Live:
    """One of the caller's open sessions, after counting the operation against its quota."""
    live = await ctx.tenancy.locate(who.id, session_id)
    ctx.limiter.take(who.id, who.quotas.calls_per_minute)
    return live


LiveSession = Annotated[Live, Depends(live_session)]
