"""The ASGI app of ``caisson serve``: the routers, the error answers, the middleware, the
metrics and console pages, and the remote MCP endpoint, over one server context."""

from __future__ import annotations

from importlib import metadata

from fastapi import FastAPI, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from caisson.server import errors, routes_admin, routes_approvals, routes_audit, routes_calls, routes_sessions
from caisson.server.console import router as console_router
from caisson.server.deps import ServerContext
from caisson.server.metrics import CONTENT_TYPE
from caisson.server.middleware import BodyLimit, LogRequests
from caisson.server.models import Problem
from caisson.server.settings import ServeSettings

DESCRIPTION = """Sandboxed sessions for AI agents, per tenant. Authenticate with
`Authorization: Bearer <API key>`. Another tenant's ids answer 404; quotas answer 429 with
Retry-After."""


def _version() -> str:
    try:
        return metadata.version("caisson-runtime")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def create_app(ctx: ServerContext, settings: ServeSettings, mcp: ASGIApp | None = None) -> FastAPI:
    error_bodies = {code: {"model": Problem} for code in (401, 403, 404, 409, 413, 429)}
    app = FastAPI(title="caisson", version=_version(), description=DESCRIPTION, responses=error_bodies)  # type: ignore[arg-type]
    app.state.caisson = ctx
    for module in (routes_admin, routes_sessions, routes_calls, routes_approvals, routes_audit):
        app.include_router(module.router)
    app.include_router(console_router)
    errors.install(app, ctx)

    @app.get("/healthz", tags=["meta"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/metrics", tags=["meta"], response_class=Response)
    async def metrics() -> Response:
        return Response(ctx.metrics.render(), media_type=CONTENT_TYPE)

    if mcp is not None:
        # A route, not a mount: clients post to /mcp itself, with no redirect to /mcp/.
        for path in ("/mcp", "/mcp/{profile}"):
            app.router.routes.append(Route(path, endpoint=mcp, methods=["GET", "POST", "DELETE"], include_in_schema=False))
    app.add_middleware(BodyLimit, default=settings.max_body, upload=settings.max_upload)
    app.add_middleware(LogRequests, requests=ctx.requests, metrics=ctx.metrics, keys=ctx.keys)
    return app
