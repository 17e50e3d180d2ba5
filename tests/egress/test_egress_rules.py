"""The egress rules and the proxy request reader, on their own: patterns, presets, refused
addresses, strict request heads and the ClientHello's server name (from a real handshake)."""

from __future__ import annotations

import ipaddress
import ssl

import pytest

from caisson.egress import EgressConfigError, EgressRules
from caisson.egress.rules import refusal
from caisson.egress.wire import Refused, client_hello, parse_request


def test_patterns_ports_and_presets() -> None:
    rules = EgressRules(["python", "*.example.com", "api.test:8443", "any.test:*", "203.0.113.7"])
    assert rules.allows("pypi.org", 443) and rules.allows("files.pythonhosted.org", 80)
    assert not rules.allows("pypi.org", 22) and not rules.allows("evil.pypi.org", 443)
    assert rules.allows("a.example.com", 443) and rules.allows("a.b.example.com", 80)
    assert not rules.allows("example.com", 443) and not rules.allows("badexample.com", 443)
    assert rules.allows("api.test", 8443) and not rules.allows("api.test", 443)
    assert rules.allows("any.test", 1) and rules.allows("any.test", 65535)
    assert rules.allows("203.0.113.7", 443)
    for preset in ("node", "github", "debian"):
        assert EgressRules([preset]).patterns


@pytest.mark.parametrize("entry", ["pythn", "exa mple.com", "*.1.2.3.4", "x.test:0", "x.test:99999", "x.test:a", ""])
def test_bad_entries_say_what_is_wrong(entry: str) -> None:
    with pytest.raises(EgressConfigError, match="egress entry"):
        EgressRules([entry])


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "10.1.2.3", "192.168.0.1", "172.17.0.1", "169.254.169.254", "::1", "fd00:ec2::254",
                "fe80::1", "::ffff:127.0.0.1", "100.64.0.1", "0.0.0.0", "224.0.0.1", "240.0.0.1"],
)
def test_non_public_addresses_are_refused(address: str) -> None:
    assert refusal(ipaddress.ip_address(address)) is not None


def test_public_addresses_pass() -> None:
    assert refusal(ipaddress.ip_address("151.101.0.223")) is None
    assert refusal(ipaddress.ip_address("2a04:4e42::223")) is None


def test_requests_are_read_strictly() -> None:
    connect = parse_request(b"CONNECT PyPI.org.:443 HTTP/1.1\r\nHost: pypi.org:443\r\n\r\n")
    assert (connect.host, connect.port, connect.forward) == ("pypi.org", 443, None)
    plain = parse_request(
        b"GET http://a.test:8080/x?y=1 HTTP/1.1\r\nHost: a.test:8080\r\nProxy-Authorization: z\r\n"
        b"Connection: keep-alive\r\nAccept: */*\r\n\r\n"
    )
    assert (plain.host, plain.port) == ("a.test", 8080)
    assert plain.forward == b"GET /x?y=1 HTTP/1.1\r\nHost: a.test:8080\r\nAccept: */*\r\nConnection: close\r\n\r\n"
    bad = [
        b"CONNECT a.test HTTP/1.1\r\n\r\n",  # no port
        b"CONNECT a.test:443 HTTP/1.1\r\nHost: b.test:443\r\n\r\n",
        b"GET http://a.test/ HTTP/1.1\r\nHost: a.test\r\nHost: b.test\r\n\r\n",
        b"GET http://a.test/ HTTP/1.1\r\nHost: b.test\r\n\r\n",
        b"GET /relative HTTP/1.1\r\nHost: a.test\r\n\r\n",
        b"GET https://a.test/ HTTP/1.1\r\n\r\n",
        b"GET http://a.test/ HTTP/1.1\r\n folded: x\r\n\r\n",
        b"GET http://a.test/ HTTP/2\r\n\r\n",
        b"CONNECT a.test:443/x HTTP/1.1\r\n\r\n",
        b"CONNECT u:p@a.test:443 HTTP/1.1\r\n\r\n",
        "GET http://ä.test/ HTTP/1.1\r\n\r\n".encode(),
    ]
    for head in bad:
        with pytest.raises(Refused):
            parse_request(head)


def _hello(server_name: str | None) -> bytes:
    """A real ClientHello, as Python's TLS client writes it."""
    context = ssl.create_default_context()
    context.check_hostname = False
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=server_name)
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


def test_the_client_hello_names_its_server() -> None:
    hello = _hello("Origin.Test")
    assert client_hello(hello).server_name == "origin.test"
    for cut in (1, 5, 40, len(hello) - 1):
        assert not client_hello(hello[:cut]).complete
    # Split across two records, as a client may send it.
    body = hello[5:]
    two = b"\x16\x03\x01" + (40).to_bytes(2, "big") + body[:40] + b"\x16\x03\x01" + (len(body) - 40).to_bytes(2, "big") + body[40:]
    assert client_hello(two).server_name == "origin.test"
    assert client_hello(_hello(None)).server_name is None
    assert client_hello(b"GET / HTTP/1.1\r\n").complete and not client_hello(b"GET /").tls
    with pytest.raises(Refused):
        client_hello(b"\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00")  # a ServerHello first


def test_serve_takes_egress_host_mappings() -> None:
    from caisson.interfaces.cli import build_parser

    args = build_parser().parse_args(["serve", "--egress-host", "pypi.internal=10.0.0.5", "--egress-host", "a.test=::1"])
    assert dict(entry.split("=", 1) for entry in args.egress_host) == {"pypi.internal": "10.0.0.5", "a.test": "::1"}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--egress-host", "pypi.internal"])


def test_egress_hosts_must_map_to_addresses() -> None:
    from pydantic import ValidationError

    from caisson.config import RuntimeConfig

    assert RuntimeConfig(egress_hosts={"Pkgs.Test.": "127.0.0.1"}).egress_hosts == {"pkgs.test": "127.0.0.1"}
    with pytest.raises(ValidationError, match="is not an IP address"):
        RuntimeConfig(egress_hosts={"pkgs.test": "pkgs.internal"})
