"""ASGI middleware of the API: request bodies within their limit (413), and per request one
access-log line, the HTTP metrics, and one request-log record naming tenant and key (handed
to the store's writer, which commits it off the request's path)."""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy.exc import DBAPIError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from caisson.logs import get_logger
from caisson.server.auth import KeyChecker, Principal, Unauthorized
from caisson.server.metrics import Metrics
from caisson.server.models import PROBLEM_TYPE, RequestRecord, problem_body

log = get_logger("caisson.server.requests")
# One line per request on stderr, for the operator's log pipeline.
access = get_logger("caisson.server.access")

# Polled constantly by monitoring, and saying nothing about tenants.
UNLOGGED = frozenset({"/metrics", "/healthz", "/readyz"})
FILE_BODY = 256 * 1024 * 1024


class BodyLimit:
    """Refuse a declared Content-Length over the limit before reading; count the rest as it
    arrives (chunked bodies), so an oversized body is never buffered whole."""

    def __init__(self, app: ASGIApp, *, default: int, upload: int) -> None:
        self.app = app
        self.default = default
        self.upload = upload

    def limit_for(self, scope: Scope) -> int:
        path: str = scope.get("path", "")
        if path.endswith("/copy-in"):  # streamed into the session as it arrives
            return self.upload
        if path.endswith("/files"):  # held whole in memory before it is written
            return min(self.upload, FILE_BODY)
        return self.default

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope)
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > limit:
            await _answer_413(scope, send, limit)
            return
        seen = 0
        refused = False
        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if refused:  # the 413 went out instead of whatever the app still says
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        async def counted() -> Message:
            nonlocal seen, refused
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > limit and not refused:
                if not started:
                    await _answer_413(scope, send, limit)
                refused = True
            # The app sees the client leave: it stops reading and its answer is dropped.
            return {"type": "http.disconnect"} if refused else message

        await self.app(scope, counted, guarded_send)


async def _answer_413(scope: Scope, send: Send, limit: int) -> None:
    scope.setdefault("state", {})["audit_note"] = "body too large"
    await send_problem(send, 413, "body_too_large", f"the request body is larger than {limit} bytes")


async def send_problem(send: Send, status: int, error: str, detail: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """An error answer in the API's ``Problem`` shape, from ASGI code below the routes."""
    body = problem_body(status, error, detail)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", PROBLEM_TYPE.encode()), (b"content-length", str(len(body)).encode()), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class LogRequests:
    def __init__(
        self, app: ASGIApp, *, log_request: Callable[[RequestRecord], None], metrics: Metrics, keys: KeyChecker
    ) -> None:
        self.app = app
        self.log_request = log_request
        self.metrics = metrics
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") in UNLOGGED:
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def watched(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, watched)
        finally:
            state = scope.get("state") or {}
            who: Principal | None = state.get("principal") or await self._who(scope)
            note = str(state.get("audit_note", ""))[:200]
            seconds = time.perf_counter() - started
            # The route's template, not the path: one series per operation, not per id.
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.requests.labels(scope["method"], str(status)).inc()
            self.metrics.request_seconds.labels(scope["method"], route, str(status)).observe(seconds)
            access.info(
                "request", method=scope["method"], path=scope["path"], route=route, status=status,
                ms=round(seconds * 1000, 1), tenant=who.tenant_id if who else None, key=who.key_id if who else None,
                **({"note": note} if note else {}),
            )
            self.log_request(RequestRecord(
                time=time.time(), tenant_id=who.tenant_id if who else None, key_id=who.key_id if who else None,
                method=scope["method"], path=scope["path"][:2048], status=status, note=note,
            ))
            if note.startswith("cross-tenant"):
                log.warning("cross-tenant attempt", tenant=who.tenant_id if who else None, path=scope["path"], note=note)

    async def _who(self, scope: Scope) -> Principal | None:
        """The key of a request answered before a route looked at it (413, 404 of no route)."""
        header = dict(scope.get("headers") or []).get(b"authorization")
        if header is None:
            return None
        try:
            return await self.keys.check(header.decode("latin-1"))
        except (Unauthorized, DBAPIError):  # a store that is away was answered 503 already
            return None
