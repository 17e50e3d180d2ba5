"""The tenant's own audit trail: its tool calls (from the control-plane store, so every
replica answers the same) and its API requests (from the server's request log, cross-tenant
attempts included)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, Query

from caisson.server.deps import Ctx, Tenant, Viewed
from caisson.server.models import AuditEvent, AuditPage, RequestRecord
from caisson.server.tenancy import NotFound

router = APIRouter(tags=["audit"])

Limit = Annotated[int, Query(ge=1, le=10_000)]


@router.get("/audit")
async def audit_events(
    whose: Viewed, ctx: Ctx, session_id: str | None = None, tool: str | None = None,
    decision: Literal["allow", "warn", "approved", "denied"] | None = None,
    since: Annotated[datetime | None, Query(description="only events at or after this time (ISO 8601)")] = None,
    cursor: Annotated[str | None, Query(pattern=r"^[0-9]{1,19}$", description="a page's next_cursor")] = None,
    order: Annotated[Literal["oldest", "newest"], Query(description="oldest first, or newest first")] = "oldest",
    limit: Limit = 100,
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
    more = len(found) > limit
    page = found[:limit]
    return AuditPage(items=[event for _, event in page], next_cursor=str(page[-1][0]) if more else None)


@router.get("/audit/calls/{call_id}")
async def audit_call(call_id: str, who: Tenant, ctx: Ctx) -> AuditEvent:
    found = await ctx.store.audit(who.id, call_id=call_id, limit=1)
    if not found:
        raise NotFound("call", call_id)
    return found[0][1]


@router.get("/audit/requests")
async def audit_requests(whose: Viewed, ctx: Ctx, limit: Limit = 100) -> list[RequestRecord]:
    """The tenant's API requests (an admin key: every caller's, or ``tenant_id``'s), oldest
    first; this request itself is not among them yet."""
    await ctx.requests.flush()
    return await ctx.store.requests(whose, limit)
