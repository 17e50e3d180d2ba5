"""`caisson bench --only egress`: a session's downloads through the egress proxy (relayed by
the daemon over its channel, decided and connected by the host) beside the same downloads
made directly on the host, from the same loopback server in the same run."""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.request
from typing import Any

import anyio

from caisson.bench.stats import summarize
from caisson.runtime import Runtime

DOWNLOAD = 100 * 1024 * 1024
NAME = "bench.test"

# Run in the session: the proxy settings are in its environment, as for any agent command.
INSIDE = r"""
import json, sys, time, urllib.request
base, size, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
lat = []
for _ in range(n):
    t = time.perf_counter()
    urllib.request.urlopen(base + "/ping", timeout=30).read()
    lat.append((time.perf_counter() - t) * 1000)
t = time.perf_counter()
body = urllib.request.urlopen("%s/bytes?n=%d" % (base, size), timeout=300)
got = 0
while True:
    chunk = body.read(1 << 20)
    if not chunk:
        break
    got += len(chunk)
print(json.dumps({"latency_ms": lat, "seconds": time.perf_counter() - t, "bytes": got}))
"""


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        size = int(self.path.partition("n=")[2] or 2) if self.path.startswith("/bytes") else 2
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        block = b"x" * (1 << 20)
        while size > 0:
            self.wfile.write(block[: min(size, len(block))])
            size -= len(block)


def _direct(base: str, size: int, n: int) -> dict[str, Any]:
    """The same requests from the host, no proxy: the baseline."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        opener.open(base + "/ping", timeout=30).read()
        lat.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    body = opener.open(f"{base}/bytes?n={size}", timeout=300)
    got = 0
    while chunk := body.read(1 << 20):
        got += len(chunk)
    return {"latency_ms": lat, "seconds": time.perf_counter() - t, "bytes": got}


def _figures(raw: dict[str, Any]) -> dict[str, Any]:
    return {
        "connection": summarize(raw["latency_ms"]),
        "download_mb": round(raw["bytes"] / 2**20, 1),
        "download_mb_per_s": round(raw["bytes"] / 2**20 / max(raw["seconds"], 1e-9), 1),
    }


async def bench_egress(iterations: int) -> dict[str, Any]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    n = max(20, iterations // 4)
    try:
        direct = await anyio.to_thread.run_sync(_direct, f"http://127.0.0.1:{port}", DOWNLOAD, n)
        async with Runtime(egress_hosts={NAME: "127.0.0.1"}) as rt, rt.session(egress=[f"{NAME}:{port}"]) as s:
            await s.write_file("/tmp/egress_bench.py", INSIDE)
            ran = await s.exec(["python3", "/tmp/egress_bench.py", f"http://{NAME}:{port}", str(DOWNLOAD), str(n)], timeout=600)
            if ran.exit_code != 0:
                raise RuntimeError(f"the in-session download failed: {ran.stderr[-2000:]}")
            proxied = json.loads(ran.stdout)
    finally:
        server.shutdown()
        server.server_close()
    through, base = _figures(proxied), _figures(direct)
    return {
        "proxy": through,
        "direct_on_host_baseline": base,
        "added_connection_ms_p50": round(through["connection"]["p50_ms"] - base["connection"]["p50_ms"], 3),
        "throughput_vs_direct": round(through["download_mb_per_s"] / max(base["download_mb_per_s"], 1e-9), 3),
    }
