"""The tenant's own audit trail: its tool calls (from the runtime's audit log) and its API
requests (from the server's request log, cross-tenant attempts included)."""

from __future__ import annotations

from typing import Annotated, Literal

import anyio
from fastapi import APIRouter, Query

from caisson.audit import AuditLog
from caisson.server.deps import Ctx, ServerContext, Tenant
from caisson.server.models import AuditEvent, RequestRecord
from caisson.server.tenancy import NotFound

router = APIRouter(tags=["audit"])

Limit = Annotated[int, Query(ge=1, le=10_000)]
# How far back a look-up of one call by id searches the tenant's events.
CALL_LOOKUP_DEPTH = 10_000


@router.get("/audit")
async def audit_events(
    who: Tenant, ctx: Ctx, session_id: str | None = None, tool: str | None = None,
    decision: Literal["allow", "warn", "approved", "denied"] | None = None, limit: Limit = 100,
) -> list[AuditEvent]:
    """The tenant's tool-call events, oldest first (a session filter must name its own session)."""
    if session_id is not None:
        await ctx.tenancy.record(who.id, session_id)
    return await anyio.to_thread.run_sync(
        lambda: _flushed(ctx).query(session=session_id, tool=tool, decision=decision, tenant=who.id, limit=limit)
    )


@router.get("/audit/calls/{call_id}")
async def audit_call(call_id: str, who: Tenant, ctx: Ctx) -> AuditEvent:
    events = await anyio.to_thread.run_sync(lambda: _flushed(ctx).query(tenant=who.id, limit=CALL_LOOKUP_DEPTH))
    for found in events:
        if found.call_id == call_id:
            return found
    raise NotFound("call", call_id)


def _flushed(ctx: ServerContext) -> AuditLog:
    """The audit log with every event recorded so far written, so a call that has answered
    is always in it (events are written by a background thread)."""
    ctx.runtime.audit.flush()
    return ctx.runtime.audit


@router.get("/audit/requests")
async def audit_requests(who: Tenant, ctx: Ctx, limit: Limit = 100) -> list[RequestRecord]:
    """The tenant's API requests, oldest first; this request itself is not among them yet."""
    await ctx.requests.flush()
    return await ctx.store.requests(who.id, limit)
