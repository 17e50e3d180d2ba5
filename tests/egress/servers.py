"""Real servers on the host's loopback for the egress tests: one HTTP handler behind a plain
and a TLS listener (a test CA the sessions trust), serving pages, redirects, a byte stream,
a small package index with a real wheel, and a git repository over smart HTTP
(``git http-backend``). Every request and every TLS server name is recorded, so a test can
count what reached which name."""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import trustme

NAMES = ["origin.test", "pkgs.test", "git.test", "evil.test", "other.test"]
PACKAGE = "caisson_egress_probe"
PACKAGE_VERSION = "1.0"


def build_wheel(directory: Path) -> Path:
    """A real, installable wheel of one module (PACKAGE), made the way a build backend does."""
    dist = f"{PACKAGE}-{PACKAGE_VERSION}"
    files = {
        f"{PACKAGE}.py": b"ANSWER = 42\n",
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {PACKAGE}\nVersion: {PACKAGE_VERSION}\n".encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: caisson-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(data)}")
    record.append(f"{dist}.dist-info/RECORD,,")
    path = directory / f"{dist}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{dist}.dist-info/RECORD", "\n".join(record) + "\n")
    return path


def make_repository(root: Path) -> Path:
    """A bare repository with one commit (README with a marker), exported over smart HTTP."""
    work = root / "work"
    work.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    (work / "README").write_text("egress clone marker\n")
    for args in (["init", "-q", "-b", "main"], ["add", "README"], ["commit", "-q", "-m", "first"]):
        subprocess.run(["git", *args], cwd=work, env=env, check=True)
    bare = root / "repo.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], env=env, check=True)
    return bare


@dataclass
class Seen:
    """What the servers received: (host header, path, body bytes) per request; TLS names."""

    requests: list[tuple[str, str, int]] = field(default_factory=list)
    server_names: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def hosts(self) -> list[str]:
        with self.lock:
            return [h.split(":")[0] for h, _, _ in self.requests]

    def clear(self) -> None:
        with self.lock:
            self.requests.clear()
            self.server_names.clear()


class _Server(http.server.ThreadingHTTPServer):
    request_queue_size = 512  # a flood of tunnels must not find the server's backlog full


class Origin:
    """The servers: ``http_port`` (plain) and ``https_port`` (TLS for every name in NAMES)."""

    def __init__(self, root: Path) -> None:
        self.seen = Seen()
        self.ca = trustme.CA()
        self.ca_pem = self.ca.cert_pem.bytes()
        self.wheel = build_wheel(root)
        self.repo = make_repository(root)
        self.open_streams = 0
        handler = self._handler()
        self.http = _Server(("127.0.0.1", 0), handler)
        self.https = _Server(("127.0.0.1", 0), handler)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.ca.issue_cert(*NAMES).configure_cert(context)

        def note_name(sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
            with self.seen.lock:
                self.seen.server_names.append(name or "")

        context.sni_callback = note_name  # type: ignore[assignment]
        self.https.socket = context.wrap_socket(self.https.socket, server_side=True)
        self.http_port = self.http.server_address[1]
        self.https_port = self.https.server_address[1]
        for server in (self.http, self.https):
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()

    def close(self) -> None:
        for server in (self.http, self.https):
            server.shutdown()
            server.server_close()

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _note(self, body: int = 0) -> None:
                with origin.seen.lock:
                    origin.seen.requests.append((self.headers.get("Host", ""), self.path, body))

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                self.send_response(status)
                for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                url = urlsplit(self.path)
                if url.path.startswith("/repo.git/"):
                    return self._git()
                self._note()
                query = parse_qs(url.query)
                if url.path == "/hello":
                    self._send(200, f"hello from {self.headers.get('Host', '')}\n".encode())
                elif url.path == "/redirect":
                    self._send(302, b"", {"Location": query["to"][0]})
                elif url.path == "/bytes":
                    self._stream(int(query["n"][0]))
                elif url.path == "/drip":
                    self._drip()
                elif url.path == f"/simple/{PACKAGE.replace('_', '-')}/":
                    link = f'<a href="/files/{origin.wheel.name}">{origin.wheel.name}</a>'
                    self._send(200, f"<html><body>{link}</body></html>".encode(), {"Content-Type": "text/html"})
                elif url.path == f"/files/{origin.wheel.name}":
                    self._send(200, origin.wheel.read_bytes(), {"Content-Type": "application/octet-stream"})
                else:
                    self._send(404, b"not here\n")

            def do_POST(self) -> None:
                if self.path.startswith("/repo.git/"):
                    return self._git()
                length = int(self.headers.get("Content-Length", "0"))
                got = 0
                while got < length:
                    chunk = self.rfile.read(min(65536, length - got))
                    if not chunk:
                        break
                    got += len(chunk)
                self._note(got)
                self._send(200, f"got {got}\n".encode())

            def _stream(self, n: int) -> None:
                self.send_response(200)
                self.send_header("Content-Length", str(n))
                self.end_headers()
                block = b"x" * (1 << 20)
                while n > 0:
                    self.wfile.write(block[: min(n, len(block))])
                    n -= len(block)

            def _drip(self) -> None:
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                origin.open_streams += 1
                try:
                    while True:
                        self.wfile.write(b"1\r\nx\r\n")
                        self.wfile.flush()
                        time.sleep(0.2)
                except OSError:
                    pass
                finally:
                    origin.open_streams -= 1

            def _git(self) -> None:
                self._note()
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length) if length else b""
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "GIT_PROJECT_ROOT": str(origin.repo.parent),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "REQUEST_METHOD": self.command,
                    "PATH_INFO": url.path,
                    "QUERY_STRING": url.query,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "GIT_CONFIG_NOSYSTEM": "1",
                    "GIT_CONFIG_GLOBAL": os.devnull,
                }
                if self.headers.get("Git-Protocol"):
                    env["GIT_PROTOCOL"] = self.headers["Git-Protocol"]
                out = subprocess.run(
                    [shutil.which("git") or "git", "http-backend"], input=body, env=env, capture_output=True, check=False
                ).stdout
                head, _, payload = out.partition(b"\r\n\r\n")
                status, headers = 200, {}
                for line in head.decode().split("\r\n"):
                    name, _, value = line.partition(":")
                    if name.lower() == "status":
                        status = int(value.split()[0])
                    elif name:
                        headers[name] = value.strip()
                self._send(status, payload, headers)

        return Handler


class Sink:
    """A TCP and a UDP listener on every host address: counts what arrives (attack targets)."""

    def __init__(self) -> None:
        self.tcp = socket.create_server(("0.0.0.0", 0))
        self.port = self.tcp.getsockname()[1]
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("0.0.0.0", self.port))
        self.tcp_hits = 0
        self.udp_hits = 0
        threading.Thread(target=self._tcp, daemon=True).start()
        threading.Thread(target=self._udp, daemon=True).start()

    def _tcp(self) -> None:
        while True:
            try:
                conn, _ = self.tcp.accept()
            except OSError:
                return
            self.tcp_hits += 1
            conn.close()

    def _udp(self) -> None:
        while True:
            try:
                self.udp.recvfrom(65536)
            except OSError:
                return
            self.udp_hits += 1

    def close(self) -> None:
        self.tcp.close()
        self.udp.close()


def host_addresses() -> list[str]:
    """This host's IPv4 addresses (docker0's gateway among them), as an agent would guess them."""
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True, check=False).stdout.split()
    found = [a for a in out if ":" not in a]
    return sorted(set(found) | {"172.17.0.1"})


