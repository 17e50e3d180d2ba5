"""web_fetch and web_search. Both run on the HOST, never inside the sandbox.

web_fetch refuses server-side request forgery: https only unless allowed, host allow and
block lists, and every address a name resolves to must be public (not loopback, private,
link-local, metadata, multicast or reserved) unless the host is explicitly allowed. The
connection then goes to the address that was checked, never to a second resolution, so a
name cannot change its answer between the check and the connect (DNS rebinding). Every
redirect hop is checked the same way.

web_search goes through a pluggable provider; the default ``none`` returns no results.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import re
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import TYPE_CHECKING, Literal, Protocol
from urllib.parse import parse_qsl, urlencode, urljoin, urlsplit, urlunsplit

import anyio
from pydantic import BaseModel, Field

from runtime.policy import Level
from runtime.tools.base import ToolError, ToolErrorInfo, ToolInput, ToolResult, tool

if TYPE_CHECKING:
    from runtime.tools.context import HasToolContext, ToolContext

# ---- settings ---------------------------------------------------------------------------


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


# ---- URL and address checks -------------------------------------------------------------

TRACKING_PARAMS = frozenset(
    {
        "fbclid", "gclid", "dclid", "gbraid", "wbraid", "msclkid", "yclid", "twclid", "igshid",
        "mc_cid", "mc_eid", "_ga", "_gl", "_hsenc", "_hsmi", "mkt_tok", "oly_anon_id", "oly_enc_id",
        "vero_id", "rb_clickid", "s_cid", "ref_src", "spm",
    }
)
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
NAT64 = ipaddress.ip_network("64:ff9b::/96")


class FetchRefused(Exception):
    """The URL or an address it resolves to is not allowed."""


def strip_tracking(url: str) -> str:
    """``url`` without utm_* and other tracking parameters, and without a fragment."""
    parts = urlsplit(url)
    query = [
        (k, v)
        for k, v in parse_qsl(parts.query, keep_blank_values=True)
        if not k.lower().startswith("utm_") and k.lower() not in TRACKING_PARAMS
    ]
    return urlunsplit((parts.scheme, parts.netloc, parts.path, urlencode(query, doseq=True), ""))


def _host_matches(host: str, patterns: list[str]) -> bool:
    for pattern in patterns:
        p = pattern.lower().strip().rstrip(".").removeprefix("*.")
        if p and (host == p or host.endswith("." + p)):
            return True
    return False


def forbidden_reason(address: str) -> str | None:
    """Why ``address`` may not be fetched from, or None for a public unicast address."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = ip.ipv4_mapped or ip.sixtofour
        if embedded is None and ip in NAT64:
            embedded = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if ip.teredo is not None:
            return "a Teredo tunnel address"
        if embedded is not None:
            return forbidden_reason(str(embedded))
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address"
    if ip.is_private:
        return "a private address"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_unspecified or ip.is_reserved or not ip.is_global:
        return "a reserved address"
    return None


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # path and query, as sent in the request line

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return f"{self.scheme}://{host}{'' if self.port == default else f':{self.port}'}{self.path}"


def check_url(url: str, settings: WebSettings) -> Target:
    """Scheme, host lists and shape of ``url``; FetchRefused with the reason otherwise."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchRefused(f"invalid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchRefused(f"unsupported URL scheme {scheme or '(none)'!r}: only https (and http when allowed)")
    if scheme == "http" and not settings.allow_http:
        raise FetchRefused("plain http is not allowed; use https")
    if parts.username is not None or parts.password is not None:
        raise FetchRefused("URLs with credentials are not allowed")
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise FetchRefused("URL has no host")
    if _host_matches(host, settings.blocklist):
        raise FetchRefused(f"host {host} is blocked")
    if settings.allowlist and not _host_matches(host, settings.allowlist):
        raise FetchRefused(f"host {host} is not in the allowed list")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(scheme, host, port or (443 if scheme == "https" else 80), path)


async def resolve_checked(target: Target, settings: WebSettings) -> list[str]:
    """The addresses to connect to; every address the host resolves to must be allowed."""
    try:
        infos = await anyio.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise FetchRefused(f"cannot resolve {target.host}: {exc}") from None
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if not addresses:
        raise FetchRefused(f"cannot resolve {target.host}")
    if target.host not in {h.lower().rstrip(".") for h in settings.allow_private_hosts}:
        for address in addresses:
            reason = forbidden_reason(address)
            if reason:
                raise FetchRefused(f"{target.host} resolves to {address}, {reason}; refusing to fetch")
    return addresses


# ---- fetching -----------------------------------------------------------------------------


@dataclass
class Response:
    url: str
    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    truncated: bool


REDIRECTS = frozenset({301, 302, 303, 307, 308})


def _connect(addresses: list[str], port: int, timeout: float | None, source: tuple[str, int] | None) -> socket.socket:
    """A TCP connection to the first of the checked ``addresses`` that answers."""
    error: OSError = OSError("no address to connect to")
    for address in addresses:
        try:
            return socket.create_connection((address, port), timeout, source)
        except OSError as exc:
            error = exc
    raise error


def _request(target: Target, addresses: list[str], settings: WebSettings, deadline: float) -> Response:
    """One HTTP GET to one of ``addresses`` (blocking; run in a worker thread)."""
    timeout = max(0.1, deadline - time.monotonic())
    conn: http.client.HTTPConnection
    if target.scheme == "https":
        # SNI and certificate checks use the host name; the socket goes to a checked address.
        context = ssl.create_default_context()
        conn = http.client.HTTPSConnection(target.host, target.port, timeout=timeout, context=context)
    else:
        conn = http.client.HTTPConnection(target.host, target.port, timeout=timeout)

    def connect(addr: tuple[str, int], t: float | None = None, src: tuple[str, int] | None = None) -> socket.socket:
        return _connect(addresses, addr[1], t, src)

    conn._create_connection = connect  # type: ignore[attr-defined]
    try:
        conn.request(
            "GET",
            target.path,
            headers={
                "User-Agent": settings.user_agent,
                "Accept": "text/html,application/xhtml+xml,text/plain;q=0.9,*/*;q=0.5",
                "Accept-Encoding": "identity",
                "Connection": "close",
            },
        )
        resp = conn.getresponse()
        headers = {k.lower(): v for k, v in resp.getheaders()}
        chunks: list[bytes] = []
        size = 0
        truncated = False
        while True:
            if time.monotonic() > deadline:
                raise TimeoutError
            chunk = resp.read(64 * 1024)
            if not chunk:
                break
            room = settings.max_response_bytes - size
            if len(chunk) > room:
                chunks.append(chunk[:room])
                truncated = True
                break
            chunks.append(chunk)
            size += len(chunk)
        return Response(target.url, resp.status, resp.reason, headers, b"".join(chunks), truncated)
    finally:
        conn.close()


async def fetch(url: str, settings: WebSettings) -> Response:
    """GET ``url`` with every SSRF check applied to it and to each redirect."""
    deadline = time.monotonic() + settings.timeout
    current = url
    for _ in range(settings.max_redirects + 1):
        target = check_url(current, settings)
        addresses = await resolve_checked(target, settings)
        try:
            with anyio.fail_after(max(0.1, deadline - time.monotonic())):
                response = await anyio.to_thread.run_sync(
                    _request, target, addresses, settings, deadline, abandon_on_cancel=True
                )
        except TimeoutError:
            raise FetchRefused(f"timed out after {settings.timeout:g} s fetching {current}") from None
        except (OSError, http.client.HTTPException) as exc:
            raise FetchRefused(f"cannot fetch {current}: {exc}") from None
        location = response.headers.get("location")
        if response.status in REDIRECTS and location:
            current = urljoin(current, location)
            continue
        return response
    raise FetchRefused(f"too many redirects (more than {settings.max_redirects})")


# ---- HTML to Markdown -------------------------------------------------------------------------

VOID = frozenset({"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"})
SKIP = frozenset(
    {"script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "head", "title", "button",
     "select", "textarea", "input", "math"}
)
BOILERPLATE = frozenset({"nav", "aside", "footer"})
BLOCK = frozenset(
    {"p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "figure", "figcaption",
     "ul", "ol", "li", "dl", "dt", "dd", "table", "thead", "tbody", "tfoot", "tr", "pre", "blockquote",
     "hr", "h1", "h2", "h3", "h4", "h5", "h6", "form", "fieldset", "address", "details", "summary", "body"}
)
# Start tags that implicitly close an open element (until a scope boundary).
IMPLIED_END: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "li": (frozenset({"li"}), frozenset({"ul", "ol"})),
    "dt": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "dd": (frozenset({"dt", "dd"}), frozenset({"dl"})),
    "tr": (frozenset({"tr", "td", "th"}), frozenset({"table", "thead", "tbody", "tfoot"})),
    "td": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "th": (frozenset({"td", "th"}), frozenset({"tr", "table"})),
    "option": (frozenset({"option"}), frozenset({"select"})),
}
# Deeper nesting is flattened, so hostile markup cannot exhaust the recursion limit.
MAX_DEPTH = 150
INDENT = "\x02"  # an indentation unit that line clean-up leaves alone; spaces in the end
LITERAL = "\x01"  # brackets a placeholder for a code block, inserted after clean-up


@dataclass
class Node:
    tag: str
    attrs: dict[str, str] = field(default_factory=dict)
    children: list[Node | str] = field(default_factory=list)

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def find_all(self, predicate: Callable[[Node], bool]) -> list[Node]:
        found: list[Node] = []
        for child in self.children:
            if isinstance(child, Node):
                if predicate(child):
                    found.append(child)
                found.extend(child.find_all(predicate))
        return found


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self.stack: list[Node] = [self.root]

    def _close_to(self, tags: frozenset[str], boundary: frozenset[str]) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            tag = self.stack[i].tag
            if tag in tags:
                del self.stack[i:]
                return
            if tag in boundary:
                return

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in IMPLIED_END:
            self._close_to(*IMPLIED_END[tag])
        elif tag in BLOCK or tag == "p":
            self._close_to(frozenset({"p"}), frozenset({"div", "li", "td", "th", "blockquote", "body"}))
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.stack[-1].children.append(node)
        if tag not in VOID and len(self.stack) < MAX_DEPTH:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Node(tag, {k: v or "" for k, v in attrs}))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse_html(html: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def _first(root: Node, tag: str) -> Node | None:
    found = root.find_all(lambda n: n.tag == tag)
    return found[0] if found else None


def _title(root: Node) -> str:
    title = _first(root, "title")
    if title is not None and title.text().strip():
        return " ".join(title.text().split())
    for meta in root.find_all(lambda n: n.tag == "meta"):
        if meta.attrs.get("property") == "og:title" and meta.attrs.get("content"):
            return meta.attrs["content"].strip()
    h1 = _first(root, "h1")
    return " ".join(h1.text().split()) if h1 is not None else ""


def _content_root(root: Node, mode: str) -> Node:
    body = _first(root, "body") or root
    if mode == "raw":
        return body
    articles = body.find_all(lambda n: n.tag == "article")
    if articles:
        return max(articles, key=lambda n: len(n.text()))
    main = body.find_all(lambda n: n.tag == "main" or n.attrs.get("role") == "main")
    return main[0] if main else body


class _Renderer:
    def __init__(self, base_url: str, skip: frozenset[str]) -> None:
        self.base_url = base_url
        self.skip = skip
        self.literals: list[str] = []

    def inline(self, node: Node) -> str:
        return " ".join(self.children(node).split())

    def children(self, node: Node, pre: bool = False) -> str:
        return "".join(self.render(c, pre) for c in node.children)

    def render(self, node: Node | str, pre: bool = False) -> str:
        if isinstance(node, str):
            return node if pre else re.sub(r"\s+", " ", node)
        tag = node.tag
        if tag in self.skip or node.attrs.get("hidden") is not None or node.attrs.get("aria-hidden") == "true":
            return ""
        if tag in ("h1", "h2", "h3", "h4", "h5", "h6"):
            text = self.inline(node)
            return f"\n\n{'#' * int(tag[1])} {text}\n\n" if text else ""
        if tag == "br":
            return "\n"
        if tag == "hr":
            return "\n\n---\n\n"
        if tag in ("strong", "b"):
            return self._wrap(node, "**")
        if tag in ("em", "i"):
            return self._wrap(node, "_")
        if tag in ("s", "del", "strike"):
            return self._wrap(node, "~~")
        if tag == "code" and not pre:
            text = node.text()
            return f"`{text}`" if text.strip() else ""
        if tag == "pre":
            return self._pre(node)
        if tag == "a":
            return self._link(node)
        if tag == "img":
            src = node.attrs.get("src", "")
            if not src or src.startswith("data:"):
                return ""
            return f"![{node.attrs.get('alt', '').strip()}]({urljoin(self.base_url, src)})"
        if tag in ("ul", "ol"):
            return "\n\n" + self._list(node, ordered=tag == "ol") + "\n\n"
        if tag == "blockquote":
            inner = clean(self.children(node))
            return "\n\n" + "\n".join("> " + line if line else ">" for line in inner.split("\n")) + "\n\n"
        if tag == "table":
            return "\n\n" + self._table(node) + "\n\n"
        if tag == "dt":
            text = self.inline(node)
            return f"\n\n**{text}**\n" if text else ""
        if tag == "dd":
            return "\n" + self.children(node) + "\n\n"
        if tag in BLOCK:
            return "\n\n" + self.children(node, pre) + "\n\n"
        return self.children(node, pre)

    def _wrap(self, node: Node, mark: str) -> str:
        inner = self.children(node)
        core = " ".join(inner.split())
        if not core:
            return inner if inner.isspace() else ""
        lead = " " if inner[:1].isspace() else ""
        trail = " " if inner[-1:].isspace() else ""
        return f"{lead}{mark}{core}{mark}{trail}"

    def _link(self, node: Node) -> str:
        text = self.inline(node)
        href = node.attrs.get("href", "").strip()
        if not text:
            return ""
        if not href or href.startswith(("javascript:", "#")):
            return text
        return f"[{text}]({urljoin(self.base_url, href)})"

    def _pre(self, node: Node) -> str:
        code = _first(node, "code")
        classes = ((code.attrs if code is not None else node.attrs).get("class") or "").split()
        lang = next((c.split("-", 1)[1] for c in classes if c.startswith(("language-", "lang-"))), "")
        body = node.text().strip("\n")
        fence = "````" if "```" in body else "```"
        self.literals.append(f"{fence}{lang}\n{body}\n{fence}")
        return f"\n\n{LITERAL}{len(self.literals) - 1}{LITERAL}\n\n"

    def _list(self, node: Node, ordered: bool) -> str:
        items: list[str] = []
        number = int(node.attrs.get("start", "1") or 1) if ordered else 0
        for child in node.children:
            if not isinstance(child, Node) or child.tag != "li":
                continue
            marker = f"{number}. " if ordered else "- "
            number += 1
            body = clean(self.children(child))
            lines = body.split("\n") if body else [""]
            pad = INDENT * len(marker)
            items.append("\n".join([marker + lines[0]] + [pad + line if line else "" for line in lines[1:]]))
        return "\n".join(items)

    def _table(self, node: Node) -> str:
        rows: list[list[str]] = []
        for tr in node.find_all(lambda n: n.tag == "tr"):
            cells = [c for c in tr.children if isinstance(c, Node) and c.tag in ("td", "th")]
            if cells:
                rows.append([self.inline(c).replace("|", "\\|") for c in cells])
        if not rows:
            return ""
        width = max(len(r) for r in rows)
        rows = [r + [""] * (width - len(r)) for r in rows]
        lines = ["| " + " | ".join(rows[0]) + " |", "|" + " --- |" * width]
        lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
        return "\n".join(lines)


def clean(text: str) -> str:
    """Trim each line, squeeze inner spaces and blank-line runs (placeholders untouched)."""
    lines = [re.sub(r" {2,}", " ", line).strip(" \t") for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def html_to_markdown(html: str, base_url: str = "", mode: str = "readability") -> tuple[str, str]:
    """(title, markdown) of an HTML document. ``readability`` keeps the main content
    (article or main element, without navigation, asides and footers); ``raw`` the whole body."""
    root = parse_html(html)
    skip = SKIP | BOILERPLATE if mode == "readability" else SKIP
    renderer = _Renderer(base_url, skip)
    markdown = clean(renderer.render(_content_root(root, mode)))

    def literal(match: re.Match[str]) -> str:
        prefix = match.group(1)
        return "\n".join(prefix + line for line in renderer.literals[int(match.group(2))].split("\n"))

    markdown = re.sub(rf"^(.*?){LITERAL}(\d+){LITERAL}", literal, markdown, flags=re.M)
    return _title(root), markdown.replace(INDENT, " ")


# ---- the tools ----------------------------------------------------------------------------------

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
            text=json.dumps(failure),
            data=failure,
            error=ToolErrorInfo(code="search_failed", message=failure["error"]),
        )
    payload = [r.model_dump() for r in results]
    return ToolResult.success(json.dumps(payload, indent=2), {"query": args.query, "results": payload})
