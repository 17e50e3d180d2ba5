"""Liveness and readiness: ``/healthz`` says the process lives; ``/readyz`` that the parts a
request needs (the control-plane store, the engine) answer, for a load balancer to route by."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
from fastapi import APIRouter

from caisson.server.deps import Ctx
from caisson.server.models import Problem

router = APIRouter(tags=["meta"])

READY_WITHIN = 2.0


class NotReady(Exception):
    """A part the server needs does not answer (503, Retry-After)."""


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", responses={503: {"model": Problem}})
async def readyz(ctx: Ctx) -> dict[str, str]:
    """Ready to serve: the store and the engine answer (else 503 naming what does not)."""
    checks: dict[str, Callable[[], Awaitable[object]]] = {"store": ctx.store.ping, "engine": ctx.runtime.backend.ping}
    failing = [what for what, check in checks.items() if not await _answers(check)]
    if failing:
        raise NotReady(f"{' and '.join(failing)} did not answer within {READY_WITHIN:g} s")
    return {"status": "ready"}


async def _answers(check: Callable[[], Awaitable[object]]) -> bool:
    with anyio.move_on_after(READY_WITHIN):
        try:
            await check()
        except Exception:  # any failure means not ready; the reason is the store's or engine's log
            return False
        return True
    return False
