"""What a session's egress may reach: its allowlist of host patterns and presets, and the
addresses no connection may go to unless the runtime's ``egress_hosts`` names them."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from caisson.errors import CaissonError

# Ports a pattern without one allows: plain HTTP and TLS.
DEFAULT_PORTS = frozenset((80, 443))

PRESETS: dict[str, tuple[str, ...]] = {
    "python": ("pypi.org", "files.pythonhosted.org"),
    "node": ("registry.npmjs.org", "registry.yarnpkg.com", "nodejs.org"),
    "github": (
        "github.com",
        "*.github.com",
        "*.githubusercontent.com",
        "ghcr.io",
    ),
    "debian": ("deb.debian.org", "security.debian.org", "ftp.debian.org"),
}

_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
_HOST = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")


class EgressConfigError(CaissonError):
    """An egress entry that names no host, pattern or preset."""


IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def ip_literal(host: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def normalize_host(host: str) -> str | None:
    """``host`` lower-cased without a final dot, or None when it is neither a DNS name nor
    an IP literal (IPv6 without brackets)."""
    host = host.lower().rstrip(".")
    literal = ip_literal(host)
    if literal is not None:
        return str(literal)
    return host if len(host) <= 253 and _HOST.match(host) else None


@dataclass(frozen=True)
class Pattern:
    host: str  # a name, or "*.suffix" for the names beneath suffix
    ports: frozenset[int] | None  # None: any port

    def matches(self, host: str, port: int) -> bool:
        if self.ports is not None and port not in self.ports:
            return False
        if self.host.startswith("*."):
            return host.endswith(self.host[1:])
        return host == self.host


def parse_pattern(entry: str) -> Pattern:
    text = entry.strip().lower()
    host, ports = text, None
    if text.startswith("["):  # [v6]:port
        close = text.find("]")
        host, rest = text[: close + 1], text[close + 1 :]
        port_text = rest[1:] if rest.startswith(":") else None
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        port_text = None
    if port_text == "*":
        ports = None
    elif port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise EgressConfigError(f"egress entry {entry!r}: the port must be 1-65535 or *")
        ports = frozenset((int(port_text),))
    else:
        ports = DEFAULT_PORTS
    name = host[2:] if host.startswith("*.") else host
    normal = normalize_host(name)
    if normal is None or (host.startswith("*.") and ip_literal(name) is not None):
        raise EgressConfigError(
            f"egress entry {entry!r} is not a host name, *.domain pattern or IP address "
            f"(optionally with :port or :*), nor a preset ({', '.join(sorted(PRESETS))})"
        )
    return Pattern(("*." if host.startswith("*.") else "") + normal, ports)


class EgressRules:
    """A session's allowlist: entries are presets (a bare name from :data:`PRESETS`) or
    patterns: ``name``, ``*.domain`` (names beneath it, not itself), each optionally
    ``:port`` or ``:*``; without a port, 80 and 443."""

    def __init__(self, entries: list[str]) -> None:
        patterns: list[Pattern] = []
        for entry in entries:
            preset = PRESETS.get(entry.strip().lower())
            if preset is not None:
                patterns.extend(parse_pattern(p) for p in preset)
            elif "." not in entry and ":" not in entry:
                raise EgressConfigError(
                    f"egress entry {entry!r} is no preset ({', '.join(sorted(PRESETS))}) and not a host name "
                    "with a domain"
                )
            else:
                patterns.append(parse_pattern(entry))
        self.patterns = tuple(patterns)

    def allows(self, host: str, port: int) -> bool:
        return any(p.matches(host, port) for p in self.patterns)


def refusal(address: IpAddress) -> str | None:
    """Why no connection may go to ``address`` unless the runtime maps a name to it, or None."""
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    if mapped is not None:
        address = mapped
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (cloud metadata lives there)"
    if address.is_private:
        return "a private address"
    if address.is_multicast or address.is_unspecified or address.is_reserved or not address.is_global:
        return "not a public unicast address"
    return None
