"""Egress by allowlist with real tools against real servers on the host's loopback (mapped
by ``RuntimeConfig.egress_hosts``): curl, pip and git reach allowed hosts through the proxy;
others fail fast with a clear error or ask; approvals, the audit and the limits hold."""

from __future__ import annotations

import socket
import time

import anyio
import pytest

from caisson import Runtime, Session
from caisson.audit import AuditEvent
from caisson.config import PoolConfig, RuntimeConfig, SessionConfig
from caisson.errors import SessionError

from .conftest import TOOL_ENV, Approver, bash, open_tooled
from .servers import NAMES, PACKAGE, Origin

pytestmark = pytest.mark.anyio


async def egress_events(rt: Runtime, session: Session) -> list[AuditEvent]:
    """The session's egress audit events, once the connections its commands made are done."""
    with anyio.fail_after(30):
        while session.egress_stats is not None and session.egress_stats.open:
            await anyio.sleep(0.05)
    rt.audit.flush()
    return rt.audit.query(session=session.id, tool="egress", limit=1000)


async def test_curl_pip_and_git_reach_allowed_hosts(ert: Runtime, origin: Origin) -> None:
    p, h = origin.https_port, origin.http_port
    allowed = [f"origin.test:{p}", f"origin.test:{h}", f"pkgs.test:{p}", f"git.test:{p}"]
    session = await open_tooled(ert, origin, allowed, Approver("deny"))
    try:
        code, out = await bash(session, f"curl -sS https://origin.test:{p}/hello && curl -sS http://origin.test:{h}/hello")
        assert code == 0, out
        assert f"hello from origin.test:{p}" in out and f"hello from origin.test:{h}" in out

        code, out = await bash(
            session,
            f"python3 -m pip install -q --target site --index-url https://pkgs.test:{p}/simple/ {PACKAGE} "
            f"&& PYTHONPATH=site python3 -c 'import {PACKAGE}; print({PACKAGE}.ANSWER)'",
        )
        assert code == 0, out
        assert "42" in out

        code, out = await bash(session, f"git clone -q https://git.test:{p}/repo.git cloned && cat cloned/README")
        assert code == 0, out
        assert "egress clone marker" in out

        events = await egress_events(ert, session)
        assert events and all(e.decision == "allow" and e.outcome == "ok" for e in events), events
        assert {e.preview.split()[-1] for e in events} >= {f"origin.test:{p}", f"pkgs.test:{p}", f"git.test:{p}"}
        assert all(e.bytes_in > 0 and e.bytes_out > 0 and e.duration_ms > 0 for e in events)
        stats = session.egress_stats
        assert stats is not None and stats.bytes_in >= sum(e.bytes_in for e in events) > 0
    finally:
        await session.close()


async def test_host_not_on_the_list_fails_fast_with_a_clear_error(ert: Runtime, origin: Origin) -> None:
    p = origin.https_port
    approver = Approver("deny")
    session = await open_tooled(ert, origin, [f"origin.test:{p}"], approver)
    try:
        origin.seen.clear()
        started = time.monotonic()
        code, out = await bash(session, f"curl -sS https://other.test:{p}/hello")
        took = time.monotonic() - started
        assert code != 0 and "403" in out, out
        assert took < 20, took
        code, out = await bash(
            session, f"python3 -m pip download --index-url https://other.test:{p}/simple/ --retries 1 {PACKAGE}"
        )
        assert code != 0 and "403 egress to other.test" in out, out
        code, out = await bash(session, f"git clone -q https://other.test:{p}/repo.git x")
        assert code != 0 and "403" in out, out
        assert "other.test" not in origin.seen.hosts() and "other.test" not in origin.seen.server_names
        assert len(approver.asked) >= 3 and all(r.domain == f"other.test:{p}" for r in approver.asked)
        events = await egress_events(ert, session)
        assert events and all(e.decision == "denied" for e in events)
    finally:
        await session.close()


async def test_approvals_once_session_and_deny(ert: Runtime, origin: Origin) -> None:
    p = origin.https_port
    fetch = f"curl -sS -o /dev/null -w '%{{http_code}}\\n' https://other.test:{p}/hello"
    for answer, expect_codes, expect_asks in (
        ("allow_once", ["200", "200"], 2),
        ("allow_session", ["200", "200"], 1),
        ("deny", [None, None], 2),
    ):
        approver = Approver(answer)
        session = await open_tooled(ert, origin, [f"origin.test:{p}"], approver)
        try:
            for expected in expect_codes:
                code, out = await bash(session, fetch)
                if expected is None:
                    assert code != 0 and "403" in out, (answer, out)
                else:
                    assert code == 0 and expected in out, (answer, out)
            assert len(approver.asked) == expect_asks, (answer, approver.asked)
            assert approver.asked[0].level == "dangerous" and approver.asked[0].tool == "egress"
            decisions = [e.decision for e in await egress_events(ert, session)]
            assert decisions == (["denied", "denied"] if answer == "deny" else ["approved", "approved"]), decisions
        finally:
            await session.close()


async def test_private_addresses_refused_unless_mapped(ert: Runtime, origin: Origin) -> None:
    p = origin.https_port
    # Every target is on the list: only the address check stands in the way.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    allowed = [f"origin.test:{p}", f"127.0.0.1:{p}", f"localhost:{p}", f"[::1]:{p}", f"169.254.169.254:{p}"]
    allowed.append(f"origin.test:{closed}")
    session = await open_tooled(ert, origin, allowed, Approver("deny"))
    try:
        origin.seen.clear()
        tried = landed = 0
        for url in (f"https://127.0.0.1:{p}/hello", f"https://localhost:{p}/hello", f"https://[::1]:{p}/hello",
                    f"https://169.254.169.254:{p}/hello"):
            code, out = await bash(session, f"curl -sS -k --noproxy '' {url}")
            tried += 1
            landed += code == 0
            assert "403" in out, out
        print(f"private targets: tried {tried}, landed {landed}")
        assert landed == 0
        assert origin.seen.requests == []
        # The same loopback server, named through the runtime's mapping, is reachable.
        code, out = await bash(session, f"curl -sS https://origin.test:{p}/hello")
        assert code == 0 and "hello" in out, out
        # An allowed host where nothing listens: a quick 502 that says so.
        code, out = await bash(session, f"curl -sS https://origin.test:{closed}/hello")
        assert code != 0 and "502" in out, out
        events = await egress_events(ert, session)
        assert any("cannot connect to origin.test" in (e.message or "") for e in events), events
        messages = [e.message or "" for e in await egress_events(ert, session) if e.outcome == "denied"]
        assert any("loopback" in m for m in messages) and any("link-local" in m for m in messages), messages
    finally:
        await session.close()


async def test_limits_bytes_out_and_connections(ert: Runtime, origin: Origin) -> None:
    p = origin.https_port
    session = await open_tooled(
        ert, origin, [f"origin.test:{p}"], Approver("deny"),
        egress_limits={"max_bytes_out": 200_000, "max_connections": 2},
    )
    try:
        origin.seen.clear()
        code, out = await bash(
            session, f"head -c 1000000 /dev/zero > up.bin; curl -sS --data-binary @up.bin https://origin.test:{p}/up"
        )
        assert code != 0, out
        received = sum(n for _, path, n in origin.seen.requests if path == "/up")
        print(f"upload of 1,000,000 bytes with a 200,000 byte limit: server received {received}")
        assert received < 200_000
        events = await egress_events(ert, session)
        assert any(e.outcome == "limit" for e in events), events
        assert sum(e.bytes_out for e in events) <= 200_000

        # Two tunnels held open; the third connection is refused with 429.
        script = (
            "import socket\n"
            "held = []\n"
            "for i in range(3):\n"
            "    s = socket.create_connection(('127.0.0.1', 3128))\n"
            f"    s.sendall(b'CONNECT origin.test:{p} HTTP/1.1\\r\\n\\r\\n')\n"
            "    print(s.recv(200).split(b'\\r\\n')[0].decode())\n"
            "    held.append(s)\n"
        )
        code, out = await bash(session, f"python3 -c \"{script}\"")
        lines = [line for line in out.splitlines() if line.startswith("HTTP/1.1")]
        assert lines[:2] == ["HTTP/1.1 200 Connection established"] * 2 and lines[2].startswith("HTTP/1.1 429"), out
    finally:
        await session.close()


async def test_connections_cut_when_the_session_ends(ert: Runtime, origin: Origin) -> None:
    p = origin.https_port
    session = await open_tooled(ert, origin, [f"origin.test:{p}"], Approver("deny"))
    closed = False
    try:
        result = await session.call(
            "bash", {"command": f"curl -sS -N https://origin.test:{p}/drip > drip.out", "run_in_background": True}
        )
        assert result.ok, result
        with anyio.fail_after(30):
            while origin.open_streams == 0:
                await anyio.sleep(0.1)
        await session.close()
        closed = True
        with anyio.fail_after(30):
            while origin.open_streams > 0:
                await anyio.sleep(0.1)
    finally:
        if not closed:
            await session.close()


async def test_egress_under_gvisor(ert: Runtime, origin: Origin) -> None:
    """gVisor sessions (attach stream, no Landlock) reach allowed hosts the same way, and only those."""
    p = origin.https_port
    approver = Approver("deny")
    session = await open_tooled(ert, origin, [f"origin.test:{p}"], approver, gvisor=True)
    try:
        origin.seen.clear()
        code, out = await bash(session, f"curl -sS https://origin.test:{p}/hello")
        assert code == 0 and f"hello from origin.test:{p}" in out, out
        code, out = await bash(session, f"curl -sS https://other.test:{p}/hello")
        assert code != 0 and "403" in out, out
        assert "other.test" not in origin.seen.hosts() and len(approver.asked) == 1
        decisions = sorted(e.decision for e in await egress_events(ert, session))
        assert decisions == ["allow", "denied"], decisions
    finally:
        await session.close()


async def test_a_pooled_container_takes_its_egress_when_bound(
    origin: Origin, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The warm pool's containers are made before anyone names an egress list: the relay
    starts when a session binds one."""
    p = origin.https_port
    config = RuntimeConfig(
        state_dir=str(tmp_path_factory.mktemp("egress-pool")), egress_hosts=dict.fromkeys(NAMES, "127.0.0.1"),
        pool=PoolConfig(size=1, session=SessionConfig(env=TOOL_ENV)),
    )
    async with Runtime(config) as rt:
        assert await rt.pool_ready(180)
        pooled = rt.backend.pool_session_ids()
        session = await open_tooled(rt, origin, [f"origin.test:{p}"], Approver("deny"))
        try:
            assert session.id in pooled
            code, out = await bash(session, f"curl -sS https://origin.test:{p}/hello")
            assert code == 0 and "hello" in out, out
            code, out = await bash(session, f"curl -sS https://other.test:{p}/hello")
            assert code != 0 and "403" in out, out
        finally:
            await session.close()


async def test_an_idle_session_with_egress_still_ends_at_its_idle_timeout(ert: Runtime, origin: Origin) -> None:
    """The host's waiting for connections is no activity: the idle timeout still ends the session."""
    session = await ert.open_session(egress=[f"origin.test:{origin.https_port}"], idle_timeout=3)
    try:
        with anyio.fail_after(60):
            while True:
                try:
                    await session.ping()
                except SessionError as exc:
                    assert "idle_timeout" in str(exc), exc
                    break
                # A ping is activity: look less often than the timeout.
                await anyio.sleep(5)
    finally:
        await session.close()
