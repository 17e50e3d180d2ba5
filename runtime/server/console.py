"""``/console``: one static page (no build step) that shows a tenant its live sessions, its
audit stream and its pending approvals, with Approve and Deny buttons. The page holds the
API key in the browser's session storage and calls the same API as any client."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(tags=["console"])

# The page may run only its own script and talk only to this origin.
CSP = "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'"


@router.get("/console", response_class=HTMLResponse, include_in_schema=False)
async def console() -> HTMLResponse:
    page = resources.files("runtime.server").joinpath("console.html").read_text(encoding="utf-8")
    return HTMLResponse(page, headers={"Content-Security-Policy": CSP, "X-Frame-Options": "DENY"})
