"""How failures are answered: one JSON ``Problem`` per error, with the status a client can
act on. Another tenant's resource is a plain 404, noted in the request log as an attempt."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from caisson.errors import CaissonError, CallTimeout, DockerUnavailable, ImageError, OpError, SessionError
from caisson.logs import get_logger
from caisson.server.approvals import AlreadyAnswered
from caisson.server.auth import Forbidden, Unauthorized
from caisson.server.deps import ServerContext
from caisson.server.quotas import QuotaExceeded
from caisson.server.routes_admin import Conflict
from caisson.server.tenancy import Elsewhere, NotAllowed, NotFound

log = get_logger("caisson.server")

OP_STATUS = {
    "not_found": 404, "cwd_not_found": 404, "no_such_task": 404, "no_such_user": 400, "command_not_found": 400,
    "permission_denied": 403, "exists": 409, "conflict": 409, "too_large": 413, "output_limit": 413,
    "not_a_directory": 400, "is_a_directory": 400, "not_executable": 400, "bad_request": 400,
}


Handler = Callable[[Request, Exception], Awaitable[JSONResponse]]

# Failures answered with a fixed status and code, their message as the detail.
PLAIN: dict[type[Exception], tuple[int, str]] = {
    Unauthorized: (401, "unauthorized"),
    Forbidden: (403, "forbidden"),
    NotAllowed: (403, "not_allowed"),
    AlreadyAnswered: (409, "conflict"),
    Conflict: (409, "conflict"),
}


def problem(status: int, error: str, detail: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": error, "detail": detail}, status_code=status, headers=headers)


def install(app: FastAPI, ctx: ServerContext) -> None:
    def on(exc_type: type[Exception]) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            app.add_exception_handler(exc_type, fn)
            return fn

        return register

    for exc_type, (status, code) in PLAIN.items():
        app.add_exception_handler(exc_type, _plain(status, code))

    @on(NotFound)
    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, NotFound)
        if exc.foreign:
            request.state.audit_note = f"cross-tenant: {exc.kind}"
        return problem(404, f"no_such_{exc.kind}", str(exc))

    @on(Elsewhere)
    async def elsewhere(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, Elsewhere)
        # 421: this replica cannot answer for the session; the one that holds it can.
        query = f"?{request.url.query}" if request.url.query else ""
        headers = {"Location": exc.url.rstrip("/") + request.url.path + query} if exc.url else None
        return problem(421, "other_replica", str(exc), headers)

    @on(QuotaExceeded)
    async def quota(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, QuotaExceeded)
        who = getattr(request.state, "principal", None)
        ctx.metrics.quota_refusals.labels(who.tenant_id if who else "", exc.quota).inc()
        request.state.audit_note = f"quota: {exc.quota}"
        return problem(429, "quota_exceeded", str(exc), {"Retry-After": str(exc.retry_after)})

    @on(CaissonError)
    async def caisson(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, CaissonError)
        if isinstance(exc, OpError):
            return problem(OP_STATUS.get(exc.code, 400), exc.code, str(exc))
        if isinstance(exc, CallTimeout):
            return problem(504, exc.code, str(exc))
        if isinstance(exc, SessionError):
            await _forget_dead_session(request, ctx, exc)
            return problem(410, exc.code, f"{exc}; the session is closed: open a new one")
        if isinstance(exc, DockerUnavailable):
            return problem(503, exc.code, str(exc))
        if isinstance(exc, ImageError):
            return problem(400, exc.code, str(exc))
        log.warning("request failed", path=request.url.path, error=str(exc))
        return problem(400, exc.code, str(exc))


def _plain(status: int, code: str) -> Handler:
    # A client must be told how to authenticate along with the refusal.
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None

    async def answer(request: Request, exc: Exception) -> JSONResponse:
        return problem(status, code, str(exc), headers)

    return answer


async def _forget_dead_session(request: Request, ctx: ServerContext, exc: SessionError) -> None:
    who = getattr(request.state, "principal", None)
    session_id = request.path_params.get("session_id")
    if who is None or who.tenant_id is None or not session_id:
        return
    try:
        live = ctx.tenancy.live(who.tenant_id, session_id)
    except NotFound:
        return
    await ctx.tenancy.dead(live, exc)
