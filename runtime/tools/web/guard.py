"""What web_fetch may reach: https only unless allowed, host allow and block lists, tracking
parameters stripped, and every address a name resolves to public (not loopback, private,
link-local, metadata, multicast or reserved) unless the host is explicitly allowed.

The connection then goes to an address that was checked, never to a second resolution
(``PinnedBackend``), so a name cannot change its answer between check and connect (DNS
rebinding); TLS still verifies the certificate against the host name.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import anyio
import httpcore

from caisson.tools.web.settings import WebSettings

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


class PinnedBackend(httpcore.AnyIOBackend):
    """Connects ``host`` only to the addresses checked for it, whatever DNS says later."""

    def __init__(self, host: str, addresses: list[str]) -> None:
        self._host = host
        self._addresses = addresses

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if host.strip("[]").lower() != self._host:
            raise httpcore.ConnectError(f"refusing to connect to {host}: not the checked host {self._host}")
        error: Exception = httpcore.ConnectError("no address to connect to")
        for address in self._addresses:
            try:
                return await super().connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                error = exc
        raise error
