"""The ASGI app of ``caisson serve``: the routers, the error answers, the middleware, the
metrics and console pages, and the remote MCP endpoint, over one server context."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from importlib import metadata
from typing import Any

from fastapi import APIRouter, FastAPI, Response
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.routing import Route
from starlette.types import ASGIApp

from caisson.server import (
    errors,
    health,
    routes_admin,
    routes_approvals,
    routes_audit,
    routes_calls,
    routes_files,
    routes_sessions,
    routes_tasks,
)
from caisson.server.console import router as console_router
from caisson.server.deps import ServerContext
from caisson.server.lean import lean_route
from caisson.server.metrics import CONTENT_TYPE
from caisson.server.middleware import BodyLimit, LogRequests
from caisson.server.models import CallBody, Problem
from caisson.server.paging import Page
from caisson.server.settings import ServeSettings

DESCRIPTION = """Sandboxed sessions for AI agents, per tenant. Authenticate with
`Authorization: Bearer <API key>`. Another tenant's ids answer 404; quotas answer 429 with
Retry-After."""


def _version() -> str:
    try:
        return metadata.version("caisson-runtime")
    except metadata.PackageNotFoundError:
        return "0+unknown"


API_PREFIX = "/v1"
# The lists the paths of before the version prefix answered as bare lists, not pages.
BARE_LISTS = {"list_sessions", "list_snapshots", "list_approvals", "list_tenants", "list_keys", "audit_requests"}


def _unprefixed(router: APIRouter) -> APIRouter:
    """``router``'s routes for the paths of before the version prefix, out of the document:
    there a list answers its page's items as a bare list, as it did before lists had pages
    (the query parameters, ``cursor`` and ``limit`` included, still apply)."""
    old = APIRouter()
    for route in router.routes:
        assert isinstance(route, APIRoute)
        if route.name not in BARE_LISTS:
            old.routes.append(route)
            continue
        item = route.response_model.model_fields["items"].annotation
        old.add_api_route(
            route.path, _items_of(route.endpoint, item), methods=list(route.methods or ()), name=route.name,
            response_model=item, include_in_schema=False,
        )
    return old


def _items_of(endpoint: Callable[..., Awaitable[Page[Any]]], items: Any) -> Callable[..., Awaitable[list[Any]]]:
    async def bare(*args: Any, **kwargs: Any) -> list[Any]:
        return (await endpoint(*args, **kwargs)).items

    # FastAPI reads the parameters (the dependencies) from the signature: the page route's own.
    bare.__signature__ = inspect.signature(endpoint, eval_str=True).replace(return_annotation=items)  # type: ignore[attr-defined]
    return bare


def _with_bearer(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document, with the API key as a bearer security scheme on every operation
    that takes one, so a generated client sends it by itself."""
    if app.openapi_schema is None:
        doc = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        doc.setdefault("components", {})["securitySchemes"] = {
            "apiKey": {"type": "http", "scheme": "bearer", "description": "an API key, cai_<key id>_<secret>"}
        }
        for path, operations in doc["paths"].items():
            if path.startswith(API_PREFIX):
                for operation in operations.values():
                    operation["security"] = [{"apiKey": []}]
        app.openapi_schema = doc
    return app.openapi_schema


def create_app(ctx: ServerContext, settings: ServeSettings, mcp: ASGIApp | None = None) -> FastAPI:
    error_bodies = {code: {"model": Problem} for code in (401, 403, 404, 409, 413, 429)}
    app = FastAPI(
        title="caisson", version=_version(), description=DESCRIPTION, responses=error_bodies,  # type: ignore[arg-type]
        # A route's function name: readable, and stable across releases (generated clients name methods by it).
        generate_unique_id_function=lambda route: route.name,
        # The server's metrics and access log are its own (Prometheus, stderr): FastAPI's
        # OpenTelemetry instrumentation, looked for on every request, has nothing to report to.
        telemetry={"tracing": False, "metrics": False, "logs": False, "operation_spans": False},
    )
    app.state.caisson = ctx
    # The tool call, the hot path, is served in front of its documented route (see lean.py).
    for prefix in (API_PREFIX, ""):
        app.router.routes.append(lean_route(
            f"{prefix}/sessions/{{session_id}}/calls", routes_calls.call, CallBody, name="call", methods=["POST"]
        ))
    app.include_router(health.router)
    for module in (routes_admin, routes_sessions, routes_calls, routes_approvals, routes_audit):
        app.include_router(module.router, prefix=API_PREFIX)
        # The paths of before the version prefix keep working, out of the document.
        app.include_router(_unprefixed(module.router), include_in_schema=False)
    for module in (routes_files, routes_tasks):  # newer than the prefix: /v1 only
        app.include_router(module.router, prefix=API_PREFIX)
    app.openapi = lambda: _with_bearer(app)  # type: ignore[method-assign]
    app.include_router(console_router)
    errors.install(app, ctx)

    @app.get("/metrics", tags=["meta"], response_class=Response)
    async def metrics() -> Response:
        return Response(ctx.metrics.render(), media_type=CONTENT_TYPE)

    if mcp is not None:
        # A route, not a mount: clients post to /mcp itself, with no redirect to /mcp/.
        for path in ("/mcp", "/mcp/{profile}"):
            app.router.routes.append(Route(path, endpoint=mcp, methods=["GET", "POST", "DELETE"], include_in_schema=False))
    app.add_middleware(BodyLimit, default=settings.max_body, upload=settings.max_upload)
    app.add_middleware(LogRequests, log_request=ctx.audit.log_request, metrics=ctx.metrics, keys=ctx.keys)
    return app
