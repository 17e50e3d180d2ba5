"""What the agent's programs say to the egress proxy, read strictly: the request head
(``CONNECT host:port`` or an absolute-form ``GET http://host/...``) and, inside a tunnel,
the TLS ClientHello's server name. Anything ambiguous is refused, never guessed at."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict

from .rules import normalize_host

MAX_HEAD = 64 * 1024
# A ClientHello larger than this (post-quantum key shares are a few KiB) is refused.
MAX_HELLO = 64 * 1024

_TOKEN = re.compile(rb"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# Hop-by-hop headers meant for the proxy, not for the server behind it.
_PROXY_HEADERS = frozenset((b"proxy-connection", b"proxy-authorization", b"connection", b"keep-alive"))


class Refused(Exception):
    """A request the proxy answers with ``status`` and ``reason`` (a sentence for the user)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class ProxyRequest(BaseModel):
    model_config = ConfigDict(frozen=True)

    method: str
    host: str
    port: int
    # For plain HTTP: the head to send on, in origin form and with ``Connection: close``, so
    # each request is decided on its own connection; None for a CONNECT tunnel.
    forward: bytes | None


def head_end(data: bytes) -> int:
    """Where the head in ``data`` ends (after its blank line), or -1 while it has not."""
    end = data.find(b"\r\n\r\n")
    return -1 if end < 0 else end + 4


def _authority(text: str, default_port: int | None) -> tuple[str, int]:
    parts = urlsplit("//" + text)
    try:
        port = parts.port if parts.port is not None else default_port
    except ValueError:
        port = None
    host = normalize_host(parts.hostname or "") if parts.hostname else None
    if host is None or port is None or not 0 < port < 65536 or parts.username is not None or parts.password is not None:
        raise Refused(400, f"{text!r} is not a host:port")
    if parts.path or parts.query or parts.fragment:
        raise Refused(400, f"{text!r} is not a host:port")
    return host, port


def parse_request(head: bytes) -> ProxyRequest:
    """The proxy request in ``head`` (ending with its blank line)."""
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        raise Refused(400, "the request head is not ASCII") from None
    lines = text[:-4].split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.1", "HTTP/1.0") or not _TOKEN.match(parts[0].encode()):
        raise Refused(400, "the request line is not METHOD TARGET HTTP/1.x")
    method, target, version = parts
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN.match(name.encode()) or "\n" in line or "\r" in line:
            raise Refused(400, "a request header is malformed (folded, bare CR/LF or no name)")
        headers.append((name.encode(), value.strip(" \t").encode()))
    hosts = [value.decode() for name, value in headers if name.lower() == b"host"]
    if len(hosts) > 1:
        raise Refused(400, "the request has more than one Host header")
    if method == "CONNECT":
        host, port = _authority(target, None)
        forward = None
    else:
        url = urlsplit(target)
        if url.scheme.lower() != "http" or not url.netloc:
            raise Refused(400, "a plain request through the proxy needs an absolute http:// URL; use CONNECT for TLS")
        host, port = _authority(url.netloc, 80)
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        kept = b"".join(n + b": " + v + b"\r\n" for n, v in headers if n.lower() not in _PROXY_HEADERS)
        forward = f"{method} {path} {version}\r\n".encode() + kept + b"Connection: close\r\n\r\n"
    if hosts:
        named, named_port = _authority(hosts[0], port)
        if (named, named_port) != (host, port):
            raise Refused(400, f"the Host header ({hosts[0]}) does not name the requested {host}:{port}")
    return ProxyRequest(method=method, host=host, port=port, forward=forward)


class Hello(BaseModel):
    """What the first bytes of a tunnel say: ``complete`` once they can be judged; ``tls``
    and the ``server_name`` (SNI) they ask for, if any."""

    complete: bool
    tls: bool = False
    server_name: str | None = None


def _u16(data: bytes, at: int) -> int:
    return int.from_bytes(data[at : at + 2], "big")


def client_hello(data: bytes) -> Hello:
    """Read the SNI from a TLS ClientHello at the start of ``data`` (which may span records)."""
    if not data:
        return Hello(complete=False)
    if data[0] != 0x16:
        return Hello(complete=True)  # not TLS: no name to check
    handshake = b""
    at = 0
    while True:
        if len(data) < at + 5:
            return Hello(complete=False)
        if data[at] != 0x16:
            raise Refused(400, "the TLS handshake is interleaved with other records")
        length = _u16(data, at + 3)
        if len(data) < at + 5 + length:
            return Hello(complete=False)
        handshake += data[at + 5 : at + 5 + length]
        at += 5 + length
        if len(handshake) >= 4:
            if handshake[0] != 1:
                raise Refused(400, "the tunnel's first TLS message is not a ClientHello")
            need = 4 + int.from_bytes(handshake[1:4], "big")
            if need > MAX_HELLO:
                raise Refused(400, "the ClientHello is too large")
            if len(handshake) >= need:
                return Hello(complete=True, tls=True, server_name=_server_name(handshake[4:need]))


def _server_name(body: bytes) -> str | None:
    try:
        at = 2 + 32  # version, random
        at += 1 + body[at]  # session id
        at += 2 + _u16(body, at)  # cipher suites
        at += 1 + body[at]  # compression methods
        if at >= len(body):
            return None  # no extensions
        end = at + 2 + _u16(body, at)
        at += 2
        while at + 4 <= end:
            kind, size = _u16(body, at), _u16(body, at + 2)
            at += 4
            if kind == 0:  # server_name: list length, then (type, length, name)
                if body[at + 2] != 0:
                    raise Refused(400, "the ClientHello's server name is not a host name")
                name = body[at + 5 : at + 5 + _u16(body, at + 3)].decode("ascii")
                normal = normalize_host(name)
                if normal is None:
                    raise Refused(400, "the ClientHello's server name is not a host name")
                return normal
            at += size
    except (IndexError, UnicodeDecodeError):
        raise Refused(400, "the ClientHello is malformed") from None
    return None
