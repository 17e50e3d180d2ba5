"""``/console``: one static page (no build step) that shows a tenant its live sessions (with
Close buttons), its closed sessions and why they closed, its audit stream and its pending
approvals, with Approve and Deny buttons, each list a page at a time. The page holds the
API key in the browser's session storage and calls the same API as any client."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse, Response

router = APIRouter(tags=["console"])

# The page may run only its own script file and talk only to this origin; no frames.
CSP = "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'"
HEADERS = {"Content-Security-Policy": CSP, "X-Frame-Options": "DENY", "Cache-Control": "no-store"}


def _asset(name: str) -> str:
    return resources.files("caisson.server").joinpath(name).read_text(encoding="utf-8")


@router.get("/console", response_class=HTMLResponse, include_in_schema=False)
async def console() -> HTMLResponse:
    return HTMLResponse(_asset("console.html"), headers=HEADERS)


@router.get("/console.js", include_in_schema=False)
async def console_script() -> Response:
    return Response(_asset("console.js"), media_type="text/javascript", headers=HEADERS)
