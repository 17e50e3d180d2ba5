"""The egress proxy's host end: each connection the agent's programs open to the daemon's
loopback relay is read here, decided like a tool call, resolved and connected by the host,
and piped byte for byte. TLS is not intercepted: the decision is on the CONNECT host (and
the ClientHello's server name, which must match it).

No background task holds an idle session: a session with egress parks one host thread,
which runs the gateway as a task of the event loop that opened the session (so the
session may be opened and closed from different tasks), until the session ends.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
import anyio.lowlevel

from caisson.audit import AuditEvent, AuditSink
from caisson.client.primitives import SandboxClient
from caisson.config import EGRESS_PORT, EgressLimits
from caisson.errors import CaissonError
from caisson.logs import get_logger
from caisson.policy import CallRequest, Decision, Level, PolicyEngine

from .rules import EgressRules, ip_literal, refusal
from .wire import MAX_HEAD, MAX_HELLO, ProxyRequest, Refused, client_hello, head_end, parse_request

log = get_logger("caisson.egress")

CHUNK = 1 << 20
# How long one daemon op waits for the agent's programs before answering "nothing yet".
POLL_WAIT = 10.0
HEAD_TIMEOUT = 30.0
CONNECT_TIMEOUT = 15.0
CLOSE_TIMEOUT = 5.0

@dataclass
class EgressStats:
    """What a session's egress did so far: connections by (decision, outcome), bytes each way."""

    connections: Counter[tuple[str, str]] = field(default_factory=Counter)
    bytes_in: int = 0
    bytes_out: int = 0
    # Connections being served now (counted until their audit event is recorded).
    open: int = 0


@dataclass
class _Conn:
    conn: int
    started: float = field(default_factory=time.monotonic)
    last: float = field(default_factory=time.monotonic)
    request: ProxyRequest | None = None
    address: str = ""
    bytes_in: int = 0
    bytes_out: int = 0
    outcome: str = "ok"
    message: str = ""
    # Whether the tunnel is open (200 sent): a refusal then cuts it without an answer.
    tunnel: bool = False


ALLOWED_BY_LIST = Decision(allowed=True, outcome="allow", level=Level.SAFE, rule="egress:allowlist")


class EgressGateway:
    """One session's egress: its rules, limits, counts and open connections."""

    def __init__(
        self,
        client: SandboxClient,
        *,
        engine: PolicyEngine,
        audit: AuditSink,
        hosts: dict[str, str],
    ) -> None:
        self.client = client
        self.rules = EgressRules(client.config.egress)
        self.limits: EgressLimits = client.config.egress_limits
        self.engine = engine
        self.audit = audit
        self.hosts = hosts
        self.stats = EgressStats()
        self._scope: anyio.CancelScope | None = None
        self._closing = False
        self._done: anyio.Event | None = None

    # ---- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Have the daemon listen, then serve its connections until :meth:`aclose`."""
        await self.client.net_listen(EGRESS_PORT)
        self._done = anyio.Event()
        token = anyio.lowlevel.current_token()
        threading.Thread(
            target=self._park, args=(token,), name=f"caisson-egress-{self.client.id}", daemon=True
        ).start()

    def _park(self, token: anyio.lowlevel.EventLoopToken) -> None:
        # A loop that closed under a session nobody closed takes the gateway with it.
        with contextlib.suppress(Exception):
            anyio.from_thread.run(self._serve, token=token)

    async def aclose(self) -> None:
        """Cut every connection and stop serving (the session ends or detaches)."""
        self._closing = True
        if self._scope is not None:
            self._scope.cancel()
        if self._done is not None:
            with anyio.move_on_after(CLOSE_TIMEOUT):
                await self._done.wait()

    async def _serve(self) -> None:
        assert self._done is not None
        try:
            with anyio.CancelScope() as self._scope:
                if self._closing:
                    return
                async with anyio.create_task_group() as tg:
                    while (conn := await self._accept()) >= 0:
                        if conn:
                            tg.start_soon(self._connection, conn)
                    tg.cancel_scope.cancel()
        finally:
            self._done.set()

    async def _accept(self) -> int:
        """The next connection (0: none yet; -1: the session is gone)."""
        try:
            return await self.client.net_accept(POLL_WAIT)
        except CaissonError as exc:
            if not self._closing:
                log.warning("egress stopped", session=self.client.id, error=str(exc))
            return -1

    @property
    def _wait(self) -> float:
        """How long an op that may wait on the agent's program gets."""
        return POLL_WAIT + self.client.config.call_timeout

    # ---- one connection -----------------------------------------------------------------

    async def _connection(self, conn_id: int) -> None:
        conn = _Conn(conn_id)
        decision: Decision | None = None
        upstream: anyio.abc.SocketStream | None = None
        self.stats.open += 1
        try:
            if self.stats.open > self.limits.max_connections:
                raise Refused(429, f"the session has {self.limits.max_connections} egress connections open, its limit")
            head, rest = await self._read_head(conn)
            conn.request = request = parse_request(head)
            decision = await self._decide(request, conn_id)
            if not decision.allowed:
                raise Refused(403, f"egress to {request.host}:{request.port} denied: {decision.message}")
            if self.stats.bytes_out >= self.limits.max_bytes_out:
                raise Refused(403, f"the session sent its egress limit of {self.limits.max_bytes_out} bytes")
            upstream = await self._dial(request, conn)
            if request.forward is None:
                await self._write(conn, b"HTTP/1.1 200 Connection established\r\n\r\n")
                conn.tunnel = True
                rest = await self._check_hello(conn, request, rest)
            else:
                rest = request.forward + rest
            await self._pipe(conn, upstream, rest)
        except Refused as exc:
            conn.outcome = "denied" if exc.status == 403 else "refused"
            conn.message = exc.reason
            if not conn.tunnel:
                with contextlib.suppress(CaissonError):
                    await self._answer(conn, exc)
        except Exception as exc:  # one connection's failure (a reset, a gone daemon) is its own
            conn.outcome = "error"
            conn.message = f"{type(exc).__name__}: {exc}"[:500]
        finally:
            with anyio.CancelScope(shield=True):
                if upstream is not None:
                    await upstream.aclose()
                with contextlib.suppress(CaissonError), anyio.move_on_after(CLOSE_TIMEOUT):
                    await self.client.net_close(conn_id, "both", timeout=self._wait)
                self._audit(conn, decision)
                self.stats.open -= 1

    async def _read_head(self, conn: _Conn) -> tuple[bytes, bytes]:
        data = b""
        with anyio.move_on_after(HEAD_TIMEOUT):
            while (end := head_end(data)) < 0:
                if len(data) > MAX_HEAD:
                    raise Refused(431, f"the request head is larger than {MAX_HEAD} bytes")
                chunk, eof = await self._read(conn, MAX_HEAD)
                data += chunk
                if eof:
                    raise Refused(400, "the connection ended before a whole request head")
            return data[:end], data[end:]
        raise Refused(408, f"no whole request head within {HEAD_TIMEOUT:g} s")

    async def _read(self, conn: _Conn, size: int) -> tuple[bytes, bool]:
        """What the agent's program sent (empty while it sends nothing), and whether it is done."""
        read = await self.client.net_read(conn.conn, size, POLL_WAIT)
        if read.data:
            conn.last = time.monotonic()
        return read.data, read.eof

    async def _write(self, conn: _Conn, data: bytes) -> bool:
        written = await self.client.net_write(conn.conn, data, timeout=self._wait)
        conn.last = time.monotonic()
        return written

    async def _answer(self, conn: _Conn, refused: Refused) -> None:
        # The reason is the status line's phrase: it is what pip, git and curl print.
        phrase = " ".join(refused.reason.encode("ascii", "replace").decode().split())[:300]
        body = f"caisson egress: {refused.reason}\n".encode("utf-8", "replace")
        await self._write(
            conn,
            f"HTTP/1.1 {refused.status} {phrase}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
            f"Connection: close\r\n\r\n".encode() + body,
        )

    async def _decide(self, request: ProxyRequest, conn_id: int) -> Decision:
        if self.rules.allows(request.host, request.port):
            return ALLOWED_BY_LIST
        target = f"{request.host}:{request.port}"
        call = CallRequest(
            tenant=self.client.config.tenant,
            session_id=self.client.id,
            call_id=f"egress-{conn_id}",
            tool="egress",
            level=Level.DANGEROUS,
            args={"host": request.host, "port": request.port, "method": request.method},
            domain=target,
            access="network",
        )
        decision = await self.engine.decide(call)
        if not decision.allowed and decision.approver is None:
            reasons = f"{target} is not on the session's egress allowlist"
            return decision.model_copy(update={"message": f"{reasons}; {decision.message}"})
        return decision

    async def _dial(self, request: ProxyRequest, conn: _Conn) -> anyio.abc.SocketStream:
        """A connection to the host the request names, at an address it may go to."""
        mapped = self.hosts.get(request.host)
        if mapped is not None:
            addresses = [mapped]
        else:
            literal = ip_literal(request.host)
            if literal is not None:
                candidates = [literal]
            else:
                try:
                    infos = await anyio.getaddrinfo(request.host, request.port, type=socket.SOCK_STREAM)
                except OSError as exc:
                    raise Refused(502, f"cannot resolve {request.host}: {exc}") from None
                candidates = [found for info in infos if (found := ip_literal(str(info[4][0]))) is not None]
            for candidate in candidates:
                # One bad answer refuses the name: a resolver must not pick the address for us.
                why = refusal(candidate)
                if why is not None:
                    raise Refused(403, f"{request.host} is (or resolves to) {candidate}, {why}")
            addresses = [str(c) for c in candidates]
        failure: OSError | None = None
        for address in addresses:
            try:
                with anyio.fail_after(CONNECT_TIMEOUT):
                    stream = await anyio.connect_tcp(address, request.port)
            except TimeoutError:
                failure = OSError(f"no answer within {CONNECT_TIMEOUT:g} s")
                continue
            except OSError as exc:
                failure = exc
                continue
            conn.address = address
            return stream
        raise Refused(502, f"cannot connect to {request.host}:{request.port}: {failure}")

    async def _check_hello(self, conn: _Conn, request: ProxyRequest, data: bytes) -> bytes:
        """The tunnel's first bytes, once a TLS ClientHello among them names the CONNECT host."""
        with anyio.move_on_after(HEAD_TIMEOUT):
            while not (hello := client_hello(data)).complete:
                if len(data) > MAX_HELLO + 1024:
                    raise Refused(400, "the ClientHello is too large")
                chunk, eof = await self._read(conn, MAX_HELLO)
                data += chunk
                if eof and not chunk:
                    return data
            if hello.server_name is not None and hello.server_name != request.host:
                raise Refused(403, f"the TLS server name {hello.server_name} is not the CONNECT host {request.host}")
            return data
        raise Refused(408, f"no TLS ClientHello within {HEAD_TIMEOUT:g} s")

    async def _pipe(self, conn: _Conn, upstream: anyio.abc.SocketStream, first: bytes) -> None:
        async with anyio.create_task_group() as tg:

            async def out() -> None:
                data, eof = first, False
                while True:
                    if data:
                        if self.stats.bytes_out + len(data) > self.limits.max_bytes_out:
                            conn.outcome = "limit"
                            conn.message = f"the session's egress limit of {self.limits.max_bytes_out} bytes out"
                            tg.cancel_scope.cancel()
                            return
                        self.stats.bytes_out += len(data)
                        conn.bytes_out += len(data)
                        try:
                            await upstream.send(data)
                        except (OSError, anyio.BrokenResourceError):
                            tg.cancel_scope.cancel()
                            return
                    if eof:
                        with contextlib.suppress(OSError, anyio.BrokenResourceError):
                            await upstream.send_eof()
                        return
                    data, eof = await self._read(conn, CHUNK)

            async def back() -> None:
                while True:
                    try:
                        data = await upstream.receive(CHUNK)
                    except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                        await self.client.net_close(conn.conn, "write", timeout=self._wait)
                        return
                    conn.last = time.monotonic()
                    self.stats.bytes_in += len(data)
                    conn.bytes_in += len(data)
                    if not await self._write(conn, data):
                        tg.cancel_scope.cancel()
                        return

            async def idle() -> None:
                while (quiet := time.monotonic() - conn.last) < self.limits.idle_seconds:
                    await anyio.sleep(self.limits.idle_seconds - quiet)
                conn.outcome = "idle"
                tg.cancel_scope.cancel()

            async def done(*parts: Any) -> None:
                async with anyio.create_task_group() as both:
                    for part in parts:
                        both.start_soon(part)
                tg.cancel_scope.cancel()

            tg.start_soon(idle)
            tg.start_soon(done, out, back)

    def _audit(self, conn: _Conn, decision: Decision | None) -> None:
        if decision is None:  # refused before a decision: no request, or over the limit
            decision = Decision(allowed=False, outcome="denied", level=Level.DANGEROUS, rule="egress:request")
        elif not decision.allowed:
            conn.outcome = "denied"
        self.stats.connections[decision.outcome, conn.outcome] += 1
        request = conn.request
        target = f"{request.host}:{request.port}" if request else "?"
        message = conn.message or (f"{target} via {conn.address}" if conn.address else "")
        event = AuditEvent(
            tenant=self.client.config.tenant,
            session_id=self.client.id,
            call_id=f"egress-{conn.conn}",
            tool="egress",
            level=decision.level,
            decision=decision.outcome,
            rule=decision.rule,
            approver=decision.approver,
            preview=f"{request.method} {target}" if request else "(no request)",
            duration_ms=round((time.monotonic() - conn.started) * 1000, 3),
            outcome=conn.outcome,
            bytes_in=conn.bytes_in,
            bytes_out=conn.bytes_out,
            message=message or None,
        )
        with contextlib.suppress(RuntimeError):  # the runtime closed its log first
            self.audit.record(event)
