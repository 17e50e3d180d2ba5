"""Sessions: open (within the tenant's allowances), list, look at, close; snapshots and forks;
the session's tool schemas."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, status

from caisson.server.deps import Ctx, LiveSession, Principal, Tenant, Viewed, principal, tenant
from caisson.server.models import ForkBody, SessionBody, SessionInfo, SessionPage, SnapshotInfo, SnapshotPage
from caisson.server.paging import KeyCursor, Limit, Order, key_of
from caisson.server.tenancy import NotFound

router = APIRouter(tags=["sessions"])

ToolFormat = Literal["json_schema", "openai", "anthropic", "mcp"]


@router.post("/sessions", status_code=status.HTTP_201_CREATED)
async def create_session(body: SessionBody, who: Tenant, ctx: Ctx) -> SessionInfo:
    [live] = await ctx.tenancy.open(who, body, ctx.approvals.handler(who.id))
    return live.info


@router.get("/sessions")
async def list_sessions(
    whose: Viewed, ctx: Ctx, state: Literal["open", "closed"] | None = "open",
    cursor: KeyCursor = None, order: Order = "oldest", limit: Limit = 100,
) -> SessionPage:
    """The tenant's sessions (an admin key: every tenant's, or ``tenant_id``'s), a page at a time."""
    found = await ctx.store.list_sessions(
        whose, state, after=key_of(cursor), newest_first=order == "newest", limit=limit + 1
    )
    return SessionPage.of(found, limit)


@router.get("/sessions/{session_id}")
async def get_session(session_id: str, who: Tenant, ctx: Ctx) -> SessionInfo:
    return await ctx.tenancy.record(who.id, session_id)


@router.delete("/sessions/{session_id}", status_code=status.HTTP_204_NO_CONTENT)
async def delete_session(session_id: str, who: Annotated[Principal, Depends(principal)], ctx: Ctx) -> None:
    """Close the session: a tenant key one of its own, an admin key any tenant's."""
    if who.scope == "admin":
        owner = await ctx.store.session(session_id)
        if owner is None:
            raise NotFound("session", session_id)
        tenant_id = owner.tenant_id
    else:
        tenant_id = (await tenant(who, ctx)).id
    await ctx.tenancy.close(await ctx.tenancy.locate(tenant_id, session_id))


@router.get("/sessions/{session_id}/tools")
async def session_tools(live: LiveSession, format: ToolFormat = "json_schema") -> list[dict[str, Any]]:
    return live.session.tools(format)


@router.post("/sessions/{session_id}/snapshot", status_code=status.HTTP_201_CREATED)
async def snapshot(live: LiveSession, ctx: Ctx) -> SnapshotInfo:
    return await ctx.tenancy.snapshot(live)


@router.post("/sessions/{session_id}/fork", status_code=status.HTTP_201_CREATED)
async def fork(live: LiveSession, body: ForkBody, who: Tenant, ctx: Ctx) -> list[SessionInfo]:
    """``n`` new sessions from this one's current files (through a snapshot of them)."""
    snap = await ctx.tenancy.snapshot(live)
    cfg = live.session.config
    opened = await ctx.tenancy.open(
        who,
        SessionBody(
            profile=cfg.profile, from_snapshot=snap.id, ttl=cfg.ttl, idle_timeout=cfg.idle_timeout,
            env=cfg.env, limits={"memory": live.info.memory}, gvisor=cfg.gvisor, network=cfg.network,  # type: ignore[arg-type]
        ),
        ctx.approvals.handler(who.id),
        n=body.n,
    )
    return [o.info for o in opened]


@router.get("/snapshots")
async def list_snapshots(
    who: Tenant, ctx: Ctx, cursor: KeyCursor = None, order: Order = "oldest", limit: Limit = 100
) -> SnapshotPage:
    """The tenant's snapshots, a page at a time."""
    found = await ctx.store.list_snapshots(who.id, after=key_of(cursor), newest_first=order == "newest", limit=limit + 1)
    return SnapshotPage.of(found, limit)
