"""web_fetch: a public web page, fetched by the HOST (never inside the sandbox), as Markdown."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field

from caisson.policy import Level
from caisson.tools.base import ToolError, ToolInput, ToolResult, tool
from caisson.tools.web.convert import html_to_markdown
from caisson.tools.web.guard import FetchRefused, strip_tracking
from caisson.tools.web.http import fetch
from caisson.tools.web.settings import web_settings

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

HTML_TYPES = ("text/html", "application/xhtml+xml")
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/javascript", "application/ld+json")


def _charset(content_type: str, body: bytes) -> str:
    match = re.search(r"charset=[\"']?([\w.:-]+)", content_type, re.I) or re.search(
        rb"<meta[^>]+charset=[\"']?([\w.:-]+)", body[:4096], re.I
    )
    if match:
        name = match.group(1)
        name = name.decode("ascii", "replace") if isinstance(name, bytes) else name
        try:
            "".encode(name)
            return name
        except LookupError:
            pass
    return "utf-8"


class WebFetchInput(ToolInput):
    url: str = Field(description="URL of the web page to fetch (https)")
    extract_mode: Literal["readability", "raw"] = Field(
        "readability",
        description='"readability": main content only (no navigation, sidebars, footers); "raw": the whole body',
    )
    max_chars: int | None = Field(None, ge=100, description="cap on the Markdown returned (default 20000)")


def _fetch_failure(url: str, message: str, code: str = "fetch_refused") -> ToolError:
    return ToolError(code, message, {"error": message, "url": url})


@tool(
    "web_fetch",
    WebFetchInput,
    level=Level.CAUTIOUS,
    access="network",
    snippet="Fetch a public web page (fetched by the host) and return its main content as Markdown",
    url=lambda a: a.url,
)
async def web_fetch(ctx: ToolContext, args: WebFetchInput) -> ToolResult:
    settings = web_settings(ctx)
    url = strip_tracking(args.url.strip())
    try:
        response = await fetch(url, settings)
    except FetchRefused as exc:
        raise _fetch_failure(url, str(exc)) from None
    if not 200 <= response.status < 300:
        raise _fetch_failure(url, f"HTTP {response.status} {response.reason} from {response.url}", "http_error")
    content_type = response.headers.get("content-type", "").lower()
    text = response.body.decode(_charset(content_type, response.body), "replace")
    if content_type.startswith(HTML_TYPES) or (not content_type and "<html" in text[:2048].lower()):
        title, markdown = html_to_markdown(text, response.url, args.extract_mode)
    elif content_type.startswith(TEXT_TYPES):
        title, markdown = "", text
    else:
        raise _fetch_failure(url, f"unsupported content type {content_type or '(none)'}", "unsupported_content")
    limit = args.max_chars or settings.max_content_chars
    original_length = len(markdown)
    truncated = original_length > limit or response.truncated
    markdown = markdown[:limit]
    final_url = strip_tracking(response.url)
    data = {
        "url": final_url,
        "title": title,
        "markdown": markdown,
        "original_length": original_length,
        "truncated": truncated,
    }
    heading = f"# {title}\n\n" if title and not markdown.startswith("# ") else ""
    note = f"\n\n[Content truncated: {original_length} characters in total]" if truncated else ""
    return ToolResult.success(
        f"{final_url}\n\n{heading}{markdown}{note}",
        data,
        truncated=truncated,
        truncation={"original_length": original_length, "limit": limit} if truncated else None,
    )
