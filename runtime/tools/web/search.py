"""web_search, through the provider the deployment configures (``none`` by default)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from caisson.policy import Level
from caisson.tools.base import ToolErrorInfo, ToolInput, ToolResult, tool
from caisson.tools.text import shown_json
from caisson.tools.web.settings import SEARCH_PROVIDERS, SearchProvider, WebSettings, web_settings

if TYPE_CHECKING:
    from caisson.tools.context import ToolContext

class WebSearchInput(ToolInput):
    query: str = Field(min_length=1, description="Search query")
    max_results: int = Field(5, ge=1, le=50, description="Maximum results to return")


def _provider(settings: WebSettings) -> SearchProvider:
    if isinstance(settings.search_provider, str):
        factory = SEARCH_PROVIDERS.get(settings.search_provider)
        if factory is None:
            raise LookupError(f"unknown web search provider {settings.search_provider!r}")
        return factory()
    return settings.search_provider


@tool(
    "web_search",
    WebSearchInput,
    level=Level.SAFE,
    access="network",
    snippet="Search the web (through the provider this deployment configures); results have title, link, snippet",
)
async def web_search(ctx: ToolContext, args: WebSearchInput) -> ToolResult:
    settings = web_settings(ctx)
    try:
        results = (await _provider(settings).search(args.query, args.max_results))[: args.max_results]
    except Exception as exc:  # a provider's failure is reported to the agent, never raised
        failure = {"error": str(exc) or type(exc).__name__, "query": args.query, "results": []}
        return ToolResult(
            ok=False,
            text=shown_json(failure),
            data=failure,
            error=ToolErrorInfo(code="search_failed", message=failure["error"]),
        )
    payload = [r.model_dump() for r in results]
    return ToolResult.success(shown_json(payload, indent=2), {"query": args.query, "results": payload})
