"""web_fetch runs on the host even when the container has no network, so it is a way for data
to leave: without an allowed domain it needs approval, and a deny-all approver stops it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from caisson import Runtime
from caisson.policy import ApprovalAnswer, ApprovalRequest, Level, Policy
from caisson.tools.web.settings import configure_web

pytestmark = pytest.mark.anyio


class Counter(BaseHTTPRequestHandler):
    hits: ClassVar[list[str]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        Counter.hits.append(self.path)
        body = b"<title>ok</title><p>fetched</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Counter)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


async def deny(request: ApprovalRequest) -> ApprovalAnswer:
    return ApprovalAnswer.deny("denied by the test")


async def test_exfiltration_needs_approval(rt: Runtime, server: str) -> None:
    Counter.hits.clear()
    asked: list[ApprovalRequest] = []

    async def deny_and_record(request: ApprovalRequest) -> ApprovalAnswer:
        asked.append(request)
        return ApprovalAnswer.deny("denied by the test")

    leaks = [f"{server}/collect?secret=value-{i}" for i in range(20)] + [f"{server}/path/token-abc{i}" for i in range(5)]
    async with rt.session(approval_handler=deny_and_record) as s:
        # The tool itself would fetch from this test server; only the policy stands in the way.
        configure_web(s, allow_http=True, allow_private_hosts=["127.0.0.1"])
        results = [await s.call("web_fetch", {"url": url}) for url in leaks]
    print(f"web_fetch with no allowed domains and deny-all approvals: {len(leaks)} tried, "
          f"{len(Counter.hits)} requests reached the server")
    assert Counter.hits == []
    assert all(r.decision == "denied" and r.level is Level.DANGEROUS for r in results)
    # The approver is told why: what would leave, and to which host.
    assert "URL and query string to 127.0.0.1" in " ".join(asked[0].reasons)


async def test_allowed_domains_are_cautious(rt: Runtime, server: str) -> None:
    Counter.hits.clear()
    async with rt.session(policy=Policy(allowed_domains=["127.0.0.1"]), approval_handler=deny) as s:
        configure_web(s, allow_http=True, allow_private_hosts=["127.0.0.1"])
        r = await s.call("web_fetch", {"url": f"{server}/page?q=1"})
    assert r.ok and r.level is Level.CAUTIOUS and "fetched" in r.text
    assert Counter.hits == ["/page?q=1"]


async def test_a_domain_grant_counts_as_allowed(rt: Runtime, server: str) -> None:
    async def approve(request: ApprovalRequest) -> ApprovalAnswer:
        return ApprovalAnswer.allow_session(approver="tester")

    Counter.hits.clear()
    async with rt.session(approval_handler=approve) as s:
        configure_web(s, allow_http=True, allow_private_hosts=["127.0.0.1"])
        first = await s.call("web_fetch", {"url": f"{server}/a"})
        s.interaction_handler = None
        second = await s.call("web_fetch", {"url": f"{server}/b"})
    assert first.ok and first.decision == "approved" and second.ok
    assert Counter.hits == ["/a", "/b"]
