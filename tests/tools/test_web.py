"""web_fetch against a local HTTP server that each test allows explicitly (no other
network), its SSRF refusals, HTML to Markdown, and the web_search provider interface."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest
from toolcall import call, code

from caisson import Session
from caisson.tools.web.convert import html_to_markdown
from caisson.tools.web.guard import check_url, forbidden_reason, strip_tracking
from caisson.tools.web.settings import SearchResult, WebSettings, configure_web, register_search_provider

pytestmark = pytest.mark.anyio

ARTICLE = """<!doctype html><html><head><title>Release notes</title><script>track()</script></head>
<body><nav><a href="/">Home</a> | <a href="/blog">Blog</a></nav>
<article><h1>Version 2.0</h1><p>We shipped <strong>faster</strong> builds and a <a href="/docs?x=1">new guide</a>.</p>
<ul><li>one</li><li>two</li></ul><pre><code class="language-python">print("hi")</code></pre></article>
<footer>Copyright</footer></body></html>"""


class Handler(BaseHTTPRequestHandler):
    seen: ClassVar[list[str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "text/html; charset=utf-8", **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        # The client may stop reading (size or time limit): that is what those tests want.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self.wfile.write(body)

    def do_GET(self) -> None:
        Handler.seen.append(self.path)
        port = self.server.server_address[1]
        path = self.path.split("?")[0]
        if path == "/page":
            self._send(200, ARTICLE.encode())
        elif path == "/to-page":
            self._send(302, b"", Location="/page")
        elif path == "/to-private":
            self._send(302, b"", Location="http://10.20.30.40/secret")
        elif path == "/to-metadata":
            self._send(301, b"", Location="http://169.254.169.254/latest/meta-data/")
        elif path == "/to-localhost":
            self._send(302, b"", Location=f"http://localhost:{port}/page")
        elif path == "/loop":
            self._send(302, b"", Location="/loop")
        elif path == "/big":
            self._send(200, b"<p>" + b"x" * 300_000 + b"</p>")
        elif path == "/slow":
            time.sleep(15)
            self._send(200, b"late")
        elif path == "/json":
            self._send(200, b'{"a": 1}', "application/json")
        elif path == "/png":
            self._send(200, b"\x89PNG\r\n", "image/png")
        elif path == "/latin1":
            body = "<title>caf\xe9</title><p>d\xe9j\xe0 vu</p>".encode("latin-1")
            self._send(200, body, "text/html; charset=iso-8859-1")
        else:
            self._send(404, b"nope")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture
def web(shared_session: Session) -> Session:
    """The shared session with the local test server explicitly allowed (and nothing else)."""
    configure_web(shared_session, **asdict(WebSettings(allow_http=True, allow_private_hosts=["127.0.0.1"])))
    return shared_session


# ---- fetching ---------------------------------------------------------------------------------


async def test_fetch_returns_readable_markdown(web: Session, server: str) -> None:
    r = await call(web, "web_fetch", url=f"{server}/page?utm_source=news&id=7&fbclid=abc")
    assert r.ok, r.text
    assert r.data["title"] == "Release notes"
    assert r.data["url"] == f"{server}/page?id=7"
    assert Handler.seen[-1] == "/page?id=7"  # tracking parameters never left the host
    md = r.data["markdown"]
    assert md.startswith("# Version 2.0")
    assert f"We shipped **faster** builds and a [new guide]({server}/docs?x=1)." in md
    assert "- one\n- two" in md and '```python\nprint("hi")\n```' in md
    assert "Home" not in md and "Copyright" not in md and "track()" not in md
    assert r.data["truncated"] is False and r.data["original_length"] == len(md)
    raw = await call(web, "web_fetch", url=f"{server}/page", extract_mode="raw")
    assert "[Home]" in raw.data["markdown"] and "Copyright" in raw.data["markdown"]


async def test_same_host_redirect_is_followed(web: Session, server: str) -> None:
    r = await call(web, "web_fetch", url=f"{server}/to-page")
    assert r.ok and r.data["url"] == f"{server}/page" and r.data["title"] == "Release notes"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/to-private", "10.20.30.40, a private address"),
        ("/to-metadata", "169.254.169.254, a cloud metadata address"),
        ("/to-localhost", "localhost resolves to"),
    ],
)
async def test_redirects_to_internal_addresses_are_refused(web: Session, server: str, path: str, reason: str) -> None:
    r = await call(web, "web_fetch", url=server + path)
    assert not r.ok and code(r) == "fetch_refused"
    assert reason in r.text
    assert r.data == {"error": r.text, "url": server + path}


async def test_a_name_resolving_to_loopback_is_refused(web: Session, server: str) -> None:
    port = server.rsplit(":", 1)[1]
    r = await call(web, "web_fetch", url=f"http://localhost:{port}/page")
    assert not r.ok and "localhost resolves to" in r.text and "loopback" in r.text


async def test_loopback_is_refused_unless_allowed(shared_session: Session, server: str) -> None:
    configure_web(shared_session, **asdict(WebSettings(allow_http=True)))
    r = await call(shared_session, "web_fetch", url=f"{server}/page")
    assert not r.ok and "127.0.0.1 resolves to 127.0.0.1, a loopback address" in r.text


async def test_https_only_by_default(shared_session: Session, server: str) -> None:
    configure_web(shared_session, **asdict(WebSettings(allow_private_hosts=["127.0.0.1"])))
    r = await call(shared_session, "web_fetch", url=f"{server}/page")
    assert not r.ok and "plain http is not allowed" in r.text
    for url in ("ftp://example.com/x", "file:///etc/passwd", "https://user:pw@example.com/"):
        r = await call(shared_session, "web_fetch", url=url)
        assert not r.ok and code(r) == "fetch_refused"


async def test_allow_and_block_lists(shared_session: Session, server: str) -> None:
    configure_web(
        shared_session,
        **asdict(WebSettings(allow_http=True, allow_private_hosts=["127.0.0.1"], blocklist=["127.0.0.1"])),
    )
    r = await call(shared_session, "web_fetch", url=f"{server}/page")
    assert not r.ok and "is blocked" in r.text
    configure_web(shared_session, blocklist=[], allowlist=["example.com"])
    r = await call(shared_session, "web_fetch", url=f"{server}/page")
    assert not r.ok and "not in the allowed list" in r.text


async def test_size_limits(web: Session, server: str) -> None:
    r = await call(web, "web_fetch", url=f"{server}/big")
    assert r.ok and r.truncated and r.data["truncated"]
    assert len(r.data["markdown"]) == 20_000 and r.data["original_length"] == 300_000
    assert "[Content truncated" in r.text
    configure_web(web, max_response_bytes=1000)
    r = await call(web, "web_fetch", url=f"{server}/big")
    assert r.data["truncated"] and r.data["original_length"] < 1000
    r = await call(web, "web_fetch", url=f"{server}/page", max_chars=100)
    assert len(r.data["markdown"]) == 100


async def test_time_limit(web: Session, server: str) -> None:
    configure_web(web, timeout=1.0)
    started = time.monotonic()
    r = await call(web, "web_fetch", url=f"{server}/slow")
    assert time.monotonic() - started < 10  # at the 1 s limit, not at the page's 15 s
    assert not r.ok and "timed out" in r.text


async def test_other_outcomes(web: Session, server: str) -> None:
    r = await call(web, "web_fetch", url=f"{server}/json")
    assert r.ok and r.data["markdown"] == '{"a": 1}'
    r = await call(web, "web_fetch", url=f"{server}/png")
    assert not r.ok and code(r) == "unsupported_content"
    r = await call(web, "web_fetch", url=f"{server}/missing")
    assert not r.ok and code(r) == "http_error" and "HTTP 404" in r.text
    r = await call(web, "web_fetch", url=f"{server}/loop")
    assert not r.ok and "too many redirects" in r.text
    r = await call(web, "web_fetch", url=f"{server}/latin1")
    assert r.data["title"] == "café" and r.data["markdown"] == "déjà vu"


# ---- the pieces ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "refused"),
    [
        ("127.0.0.1", True), ("10.0.0.1", True), ("172.16.5.4", True), ("192.168.1.1", True),
        ("169.254.169.254", True), ("100.100.100.200", True), ("0.0.0.0", True), ("224.0.0.1", True),
        ("::1", True), ("fe80::1", True), ("fd00:ec2::254", True), ("::ffff:10.0.0.1", True),
        ("2002:a00:1::", True), ("64:ff9b::7f00:1", True),
        ("93.184.216.34", False), ("2606:4700:4700::1111", False),
    ],
)
def test_address_classification(address: str, refused: bool) -> None:
    assert (forbidden_reason(address) is not None) == refused


def test_url_checks_and_tracking() -> None:
    s = WebSettings()
    assert check_url("https://Example.COM./a?b=1", s).host == "example.com"
    assert check_url("https://example.com", s).path == "/"
    assert check_url("https://[2606:4700::1]:8443/x", s).url == "https://[2606:4700::1]:8443/x"
    assert strip_tracking("https://x.org/p?utm_medium=a&gclid=1&q=keep#frag") == "https://x.org/p?q=keep"


def test_html_to_markdown_details() -> None:
    html = (
        "<title>T</title><body><main><h2>Sub</h2><p>a<br>b</p><blockquote><p>q1</p><p>q2</p></blockquote>"
        "<ol start='3'><li>x<ul><li>nested</li></ul></li></ol>"
        "<table><tr><th>k</th><th>v</th></tr><tr><td>1</td><td>a|b</td></tr></table>"
        "<img src='/i.png' alt='pic'><a href='javascript:x()'>js</a></main></body>"
    )
    title, md = html_to_markdown(html, "https://h.org/dir/")
    assert title == "T"
    assert md.startswith("## Sub\n\na\nb\n\n> q1\n>\n> q2")
    assert "3. x" in md and "   - nested" in md
    assert "| k | v |\n| --- | --- |\n| 1 | a\\|b |" in md
    assert "![pic](https://h.org/i.png)" in md and "js" in md and "javascript" not in md
    deep = "<div>" * 5000 + "deep" + "</div>" * 5000
    assert html_to_markdown(deep)[1] == "deep"


# ---- web_search ----------------------------------------------------------------------------------------


async def test_search_none_provider_returns_no_results(shared_session: Session) -> None:
    configure_web(shared_session, search_provider="none")
    r = await call(shared_session, "web_search", query="rust async runtimes")
    assert r.ok and json.loads(r.text) == [] and r.data == {"query": "rust async runtimes", "results": []}


async def test_search_plugged_provider_and_failure_shape(shared_session: Session) -> None:
    class Fixed:
        name = "fixed"

        async def search(self, query: str, max_results: int) -> list[SearchResult]:
            return [SearchResult(title=f"{query} {i}", link=f"https://r.example/{i}", snippet="s") for i in range(9)]

    class Broken:
        name = "broken"

        async def search(self, query: str, max_results: int) -> list[SearchResult]:
            raise RuntimeError("quota exceeded")

    register_search_provider("fixed", Fixed)
    configure_web(shared_session, search_provider="fixed")
    r = await call(shared_session, "web_search", query="q", max_results=2)
    assert json.loads(r.text) == [
        {"title": "q 0", "link": "https://r.example/0", "snippet": "s"},
        {"title": "q 1", "link": "https://r.example/1", "snippet": "s"},
    ]
    configure_web(shared_session, search_provider=Broken())
    r = await call(shared_session, "web_search", query="q")
    assert not r.ok and json.loads(r.text) == {"error": "quota exceeded", "query": "q", "results": []}
    configure_web(shared_session, search_provider="no-such-provider")
    r = await call(shared_session, "web_search", query="q")
    assert not r.ok and "unknown web search provider" in json.loads(r.text)["error"]
