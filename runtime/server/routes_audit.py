"""The tenant's own audit trail: its tool calls (from the control-plane store, so every
replica answers the same) and its API requests (from the server's request log, cross-tenant
attempts included)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from caisson.server.deps import Ctx, Tenant, Viewed
from caisson.server.models import AuditEvent, AuditPage, RequestPage
from caisson.server.paging import IdCursor, Limit, Order
from caisson.server.tenancy import NotFound

router = APIRouter(tags=["audit"])


@router.get("/audit")
async def audit_events(
    whose: Viewed, ctx: Ctx, session_id: str | None = None, tool: str | None = None,
    decision: Literal["allow", "warn", "approved", "denied"] | None = None,
    since: Annotated[datetime | None, Query(description="only events at or after this time (ISO 8601)")] = None,
    cursor: IdCursor = None, order: Order = "oldest", limit: Limit = 100,
) -> AuditPage:
    """The tenant's tool-call events (an admin key: every tenant's, or ``tenant_id``'s), a page
    at a time; a tenant's session filter must name its own session. Every call answered is
    here: its event was stored before its answer left."""
    if session_id is not None and whose is not None:
        await ctx.tenancy.record(whose, session_id)
    found = await ctx.store.audit(
        whose, session_id=session_id, tool=tool, decision=decision, since=since.timestamp() if since else None,
        after=int(cursor) if cursor else None, newest_first=order == "newest", limit=limit + 1,
    )
    return AuditPage.of(found, limit)


@router.get("/audit/calls/{call_id}")
async def audit_call(call_id: str, who: Tenant, ctx: Ctx) -> AuditEvent:
    found = await ctx.store.audit(who.id, call_id=call_id, limit=1)
    if not found:
        raise NotFound("call", call_id)
    return found[0][1]


@router.get("/audit/requests")
async def audit_requests(
    whose: Viewed, ctx: Ctx, cursor: IdCursor = None, order: Order = "oldest", limit: Limit = 100
) -> RequestPage:
    """The tenant's API requests (an admin key: every caller's, or ``tenant_id``'s), a page at
    a time; this request itself is not among them yet."""
    await ctx.audit.flush()
    found = await ctx.store.requests(
        whose, after=int(cursor) if cursor else None, newest_first=order == "newest", limit=limit + 1
    )
    return RequestPage.of(found, limit)
