"""Tenants and API keys, for admin keys only."""

from __future__ import annotations

import secrets

from fastapi import APIRouter, status

from caisson.server import auth
from caisson.server.deps import Admin, Ctx, ServerContext
from caisson.server.models import CreatedKey, KeyBody, KeyPage, Quotas, TenantBody, TenantInfo, TenantPage
from caisson.server.paging import KeyCursor, Limit, Order, key_of
from caisson.server.tenancy import NotFound

router = APIRouter(tags=["admin"])


class Conflict(Exception):
    """Answered 409."""


@router.post("/tenants", status_code=status.HTTP_201_CREATED)
async def create_tenant(body: TenantBody, _: Admin, ctx: Ctx) -> TenantInfo:
    if await ctx.store.tenant_named(body.name) is not None:
        raise Conflict(f"a tenant named {body.name!r} exists already")
    return await ctx.store.add_tenant("t-" + secrets.token_hex(6), body.name, body.quotas)


@router.get("/tenants")
async def list_tenants(
    _: Admin, ctx: Ctx, cursor: KeyCursor = None, order: Order = "oldest", limit: Limit = 100
) -> TenantPage:
    found = await ctx.store.list_tenants(after=key_of(cursor), newest_first=order == "newest", limit=limit + 1)
    return TenantPage.of(found, limit)


async def _existing(ctx: ServerContext, tenant_id: str) -> None:
    if await ctx.store.tenant(tenant_id) is None:
        raise NotFound("tenant", tenant_id)


@router.put("/tenants/{tenant_id}/quotas")
async def set_quotas(tenant_id: str, body: Quotas, _: Admin, ctx: Ctx) -> TenantInfo:
    await _existing(ctx, tenant_id)
    await ctx.store.set_quotas(tenant_id, body)
    ctx.tenancy.forget_tenant(tenant_id)
    found = await ctx.store.tenant(tenant_id)
    assert found is not None
    return found


@router.post("/tenants/{tenant_id}/keys", status_code=status.HTTP_201_CREATED)
async def create_key(tenant_id: str, body: KeyBody, _: Admin, ctx: Ctx) -> CreatedKey:
    await _existing(ctx, tenant_id)
    return await auth.create_key(ctx.store, "tenant", tenant_id, body.label)


@router.post("/admin/keys", status_code=status.HTTP_201_CREATED)
async def create_admin_key(body: KeyBody, _: Admin, ctx: Ctx) -> CreatedKey:
    return await auth.create_key(ctx.store, "admin", None, body.label)


@router.get("/keys")
async def list_keys(
    _: Admin, ctx: Ctx, tenant_id: str | None = None, cursor: KeyCursor = None, order: Order = "oldest", limit: Limit = 100
) -> KeyPage:
    found = await ctx.store.list_keys(tenant_id, after=key_of(cursor), newest_first=order == "newest", limit=limit + 1)
    return KeyPage.of(found, limit)


@router.delete("/keys/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
async def revoke_key(key_id: str, _: Admin, ctx: Ctx) -> None:
    if not await ctx.store.revoke_key(key_id):
        raise NotFound("key", key_id)
    ctx.keys.forget(key_id)
