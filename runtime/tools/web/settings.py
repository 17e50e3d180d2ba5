"""Per-session web settings and the pluggable web_search provider."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from pydantic import BaseModel

if TYPE_CHECKING:
    from caisson.tools.context import HasToolContext, ToolContext


class SearchResult(BaseModel):
    title: str
    link: str
    snippet: str = ""


class SearchProvider(Protocol):
    """What a deployment implements to give web_search real results."""

    name: str

    async def search(self, query: str, max_results: int) -> list[SearchResult]: ...


class NoSearchProvider:
    """The default: web search disabled, always no results."""

    name = "none"

    async def search(self, query: str, max_results: int) -> list[SearchResult]:
        return []


SEARCH_PROVIDERS: dict[str, Callable[[], SearchProvider]] = {"none": NoSearchProvider}


def register_search_provider(name: str, factory: Callable[[], SearchProvider]) -> None:
    """Make a provider selectable by name (``configure_web(session, search_provider=name)``)."""
    SEARCH_PROVIDERS[name] = factory


@dataclass
class WebSettings:
    allow_http: bool = False
    allowlist: list[str] = field(default_factory=list)  # when non-empty, only these hosts (and subdomains)
    blocklist: list[str] = field(default_factory=list)
    # Hosts, exactly as written in URLs, that may resolve to non-public addresses (e.g. a
    # test server on 127.0.0.1). Names not listed here never reach such addresses.
    allow_private_hosts: list[str] = field(default_factory=list)
    max_response_bytes: int = 5 * 1024 * 1024
    max_content_chars: int = 20_000
    timeout: float = 15.0
    max_redirects: int = 5
    user_agent: str = "caisson/0.1 (+web_fetch)"
    search_provider: str | SearchProvider = "none"


def web_settings(ctx: ToolContext) -> WebSettings:
    return ctx.tool_state("web.settings", WebSettings)


def configure_web(session: HasToolContext, **changes: object) -> WebSettings:
    """Change this session's web settings, e.g. ``configure_web(s, allow_http=True)``."""
    settings = web_settings(session.tool_context())
    for name, value in changes.items():
        if not hasattr(settings, name):
            raise ValueError(f"unknown web setting {name!r}")
        setattr(settings, name, value)
    return settings
