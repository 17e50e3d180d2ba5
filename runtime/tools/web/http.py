"""GET a URL with httpx, every hop checked (see guard.py): redirects followed one at a time,
each to an address checked for its own host; the body capped in size and the whole in time."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from urllib.parse import urljoin

import anyio
import httpcore
import httpx

from caisson.tools.web.guard import FetchRefused, PinnedBackend, Target, check_url, resolve_checked
from caisson.tools.web.settings import WebSettings

REDIRECTS = frozenset({301, 302, 303, 307, 308})
READ_CHUNK = 64 * 1024


@dataclass
class Response:
    url: str
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    truncated: bool


class PinnedTransport(httpx.AsyncHTTPTransport):
    """httpx's transport, with connections made only to the checked addresses."""

    def __init__(self, host: str, addresses: list[str]) -> None:
        super().__init__(retries=0)
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl.create_default_context(),
            max_connections=1,
            network_backend=PinnedBackend(host, addresses),
        )


async def _get(target: Target, addresses: list[str], settings: WebSettings) -> Response:
    headers = {
        "User-Agent": settings.user_agent,
        "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
        "Accept-Encoding": "identity",
    }
    transport = PinnedTransport(target.host, addresses)
    async with (
        httpx.AsyncClient(transport=transport, follow_redirects=False, trust_env=False) as client,
        client.stream("GET", target.url, headers=headers) as response,
    ):
        chunks: list[bytes] = []
        size = 0
        truncated = False
        async for chunk in response.aiter_raw(READ_CHUNK):
            room = settings.max_response_bytes - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                truncated = True
                break
            chunks.append(chunk)
            size += len(chunk)
        return Response(
            target.url,
            response.status_code,
            response.reason_phrase,
            {k.lower(): v for k, v in response.headers.items()},
            b"".join(chunks),
            truncated,
        )


async def fetch(url: str, settings: WebSettings) -> Response:
    """GET ``url`` with every check applied to it and to each redirect."""
    current = url
    try:
        with anyio.fail_after(settings.timeout):
            for _ in range(settings.max_redirects + 1):
                target = check_url(current, settings)
                addresses = await resolve_checked(target, settings)
                try:
                    response = await _get(target, addresses, settings)
                except httpx.HTTPError as exc:
                    raise FetchRefused(f"cannot fetch {current}: {exc}") from None
                location = response.headers.get("location")
                if response.status in REDIRECTS and location:
                    current = urljoin(current, location)
                    continue
                return response
    except TimeoutError:
        raise FetchRefused(f"timed out after {settings.timeout:g} s fetching {current}") from None
    raise FetchRefused(f"too many redirects (more than {settings.max_redirects})")
