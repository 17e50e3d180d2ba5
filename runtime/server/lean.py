"""The tool-call route served without FastAPI's generic request handling.

A tool call is the API's hot path, and profiling ``caisson serve`` under load showed FastAPI's
per-request work (solving dependencies, parsing the body into a dict and validating it again,
validating and encoding the response through ``jsonable_encoder``, the per-request exit
stacks) costing more CPU than the routing, auth and audit around it. This route runs the
same endpoint function with the same dependency (``live_session``: key, tenant, session,
quota) and the same body model, parses the body in one step (pydantic's JSON parser), and
encodes the result in one step. Failures go through the app's exception handlers as any
route's do, so they answer the same problem bodies; the route's document stays the FastAPI
route's, which this one is served in front of."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope

from caisson.server.deps import ServerContext, live_session
from caisson.server.tenancy import Live

B = TypeVar("B", bound=BaseModel)
Endpoint = Callable[[Live, B, ServerContext], Awaitable[BaseModel]]


def lean_route(path: str, endpoint: Endpoint[B], body: type[B], *, name: str, methods: list[str]) -> Route:
    """``endpoint(live, body, ctx)`` served at ``path`` (which names ``{session_id}``)."""

    async def handle(request: Request) -> Response:
        live = await live_session(request.path_params["session_id"], request)
        parsed = _parse(body, await request.body(), request.headers.get("content-type", ""))
        result = await endpoint(live, parsed, request.app.state.caisson)
        return Response(result.model_dump_json(), media_type="application/json")

    return _Named(path, handle, methods=methods, name=name, include_in_schema=False)


class _Named(Route):
    """A route that names itself in the scope, as FastAPI's do: the access log and metrics
    go by its template."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match != Match.NONE:
            child["route"] = self
        return match, child


def _parse(model: type[B], raw: bytes, content_type: str) -> B:
    """The body as FastAPI would take it: JSON (by its content type) validated by ``model``;
    anything else answers 422 with the fields' errors located under ``body``."""
    kind = content_type.split(";", 1)[0].strip().lower()
    if raw and not (kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))):
        raise RequestValidationError([_error(("body",), "model_attributes_type", "send the body as application/json")])
    try:
        return model.model_validate_json(raw or b"null")
    except ValidationError as exc:
        if not raw:
            raise RequestValidationError([_error(("body",), "missing", "Field required")]) from None
        raise RequestValidationError([
            _error(("body", *e["loc"]), e["type"], e["msg"]) for e in exc.errors(include_url=False, include_input=False)
        ]) from None


def _error(loc: tuple[Any, ...], kind: str, msg: str) -> dict[str, Any]:
    return {"loc": loc, "type": kind, "msg": msg}
