"""How failures are answered: one JSON ``Problem`` per error, with the status a client can
act on. Another tenant's resource is a plain 404, noted in the request log as an attempt."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

from caisson.errors import CaissonError, CallTimeout, DockerUnavailable, HostLimit, ImageError, OpError, SessionError
from caisson.logs import get_logger
from caisson.server.approvals import AlreadyAnswered
from caisson.server.audit_writer import StoreUnavailable
from caisson.server.auth import Forbidden, Unauthorized
from caisson.server.deps import ServerContext
from caisson.server.health import NotReady
from caisson.server.models import PROBLEM_TYPE, problem_body
from caisson.server.paging import InvalidCursor
from caisson.server.quotas import QuotaExceeded
from caisson.server.routes_admin import Conflict
from caisson.server.tenancy import Elsewhere, EnvRefused, Gone, NotAllowed, NotFound

log = get_logger("caisson.server")

OP_STATUS = {
    "not_found": 404, "cwd_not_found": 404, "no_such_task": 404, "no_such_user": 400, "command_not_found": 400,
    "permission_denied": 403, "exists": 409, "conflict": 409, "too_large": 413, "output_limit": 413,
    "not_a_directory": 400, "is_a_directory": 400, "not_executable": 400, "bad_request": 400,
    "process_limit": 429,
}


Handler = Callable[[Request, Exception], Awaitable[Response]]

# Failures answered with a fixed status and code, their message as the detail.
PLAIN: dict[type[Exception], tuple[int, str]] = {
    Unauthorized: (401, "unauthorized"),
    Forbidden: (403, "forbidden"),
    NotAllowed: (403, "not_allowed"),
    AlreadyAnswered: (409, "conflict"),
    Conflict: (409, "conflict"),
    Gone: (410, "session_gone"),
    InvalidCursor: (422, "invalid_cursor"),
    EnvRefused: (422, "env_refused"),
}


def problem(
    status: int, error: str, detail: str, headers: Mapping[str, str] | None = None, errors: list[dict[str, Any]] | None = None
) -> Response:
    return Response(problem_body(status, error, detail, errors), status, headers=headers, media_type=PROBLEM_TYPE)


def install(app: FastAPI, ctx: ServerContext) -> None:
    def on(exc_type: type[Exception]) -> Callable[[Handler], Handler]:
        def register(fn: Handler) -> Handler:
            app.add_exception_handler(exc_type, fn)
            return fn

        return register

    @on(RequestValidationError)
    async def invalid(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        errors = [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))} for e in exc.errors()]
        where = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:5])
        return problem(422, "invalid_request", f"the request does not fit the API's schema: {where}", errors=errors)

    @on(StarletteHTTPException)
    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        if exc.status_code == 404:
            detail = f"no route {request.url.path}: see /openapi.json for the API's routes"
        elif exc.status_code == 405:
            detail = f"{request.method} is not a method of {request.url.path}; allowed: {(exc.headers or {}).get('Allow', '?')}"
        else:
            detail = str(exc.detail)
        return problem(exc.status_code, HTTPStatus(exc.status_code).phrase.lower().replace(" ", "_"), detail, exc.headers)

    @on(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        log.error("request failed unexpectedly", path=request.url.path, error=repr(exc))
        return problem(500, "internal_error", "the server failed to answer this request; it is logged, try again later")

    for exc_type, (status, code) in PLAIN.items():
        app.add_exception_handler(exc_type, _plain(status, code))

    @on(NotFound)
    async def not_found(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, NotFound)
        if exc.foreign:
            request.state.audit_note = f"cross-tenant: {exc.kind}"
        return problem(404, f"no_such_{exc.kind}", str(exc))

    @on(Elsewhere)
    async def elsewhere(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, Elsewhere)
        # 421: this replica cannot answer for the session; the one that holds it can.
        query = f"?{request.url.query}" if request.url.query else ""
        headers = {"Location": exc.url.rstrip("/") + request.url.path + query} if exc.url else None
        return problem(421, "other_replica", str(exc), headers)

    @on(QuotaExceeded)
    async def quota(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, QuotaExceeded)
        who = getattr(request.state, "principal", None)
        ctx.metrics.quota_refusals.labels(who.tenant_id if who else "", exc.quota).inc()
        request.state.audit_note = f"quota: {exc.quota}"
        return problem(429, "quota_exceeded", str(exc), {"Retry-After": str(exc.retry_after)})

    @on(StoreUnavailable)
    @on(sa_exc.DBAPIError)
    async def store_away(request: Request, exc: Exception) -> Response:
        log.warning("the store did not answer", path=request.url.path, error=str(exc).splitlines()[0])
        detail = str(exc) if isinstance(exc, StoreUnavailable) else "the control-plane store does not answer; try again"
        return problem(503, "store_unavailable", detail, {"Retry-After": str(StoreUnavailable.retry_after)})

    @on(NotReady)
    async def not_ready(request: Request, exc: Exception) -> Response:
        return problem(503, "not_ready", str(exc), {"Retry-After": str(StoreUnavailable.retry_after)})

    @on(CaissonError)
    async def caisson(request: Request, exc: Exception) -> Response:
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
        if isinstance(exc, HostLimit):
            # The host is full for now, not the request wrong: another session's close makes room.
            return problem(503, exc.code, str(exc), {"Retry-After": "30"})
        if isinstance(exc, ImageError):
            return problem(400, exc.code, str(exc))
        log.warning("request failed", path=request.url.path, error=str(exc))
        return problem(400, exc.code, str(exc))


def _plain(status: int, code: str) -> Handler:
    # A client must be told how to authenticate along with the refusal.
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None

    async def answer(request: Request, exc: Exception) -> Response:
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
