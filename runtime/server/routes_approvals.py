"""The tenant's approval queue: dangerous calls of its sessions wait here for an answer."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Depends

from caisson.server.deps import Ctx, Principal, Tenant, Viewed, principal
from caisson.server.models import ApprovalAnswerBody, ApprovalInfo, ApprovalPage
from caisson.server.paging import KeyCursor, Limit, Order, key_of

router = APIRouter(tags=["approvals"])


@router.get("/approvals")
async def list_approvals(
    whose: Viewed, ctx: Ctx, state: Literal["pending", "allow_once", "allow_session", "deny", "expired"] | None = "pending",
    cursor: KeyCursor = None, order: Order = "oldest", limit: Limit = 100,
) -> ApprovalPage:
    """The tenant's approvals in ``state`` (an admin key: every tenant's, or ``tenant_id``'s), a
    page at a time."""
    found = await ctx.store.list_approvals(
        whose, state, after=key_of(cursor), newest_first=order == "newest", limit=limit + 1
    )
    return ApprovalPage.of(found, limit)


@router.get("/approvals/{approval_id}")
async def get_approval(approval_id: str, who: Tenant, ctx: Ctx) -> ApprovalInfo:
    return await ctx.approvals.get(who.id, approval_id)


@router.post("/approvals/{approval_id}")
async def answer_approval(
    approval_id: str, body: ApprovalAnswerBody, who: Tenant, ctx: Ctx, key: Annotated[Principal, Depends(principal)]
) -> ApprovalInfo:
    """Allow once, allow for the rest of the session, or deny (with a reason the agent sees);
    the answering key is recorded as the approver."""
    return await ctx.approvals.answer(who.id, approval_id, body, approver=key.key_id)
