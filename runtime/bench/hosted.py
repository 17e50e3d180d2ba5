"""Bench group 'hosted': ``caisson serve`` under load, in its own process as deployed. Five
tenants, twenty sessions, fifty concurrent clients (``RemoteRuntime``) making 2,000 tool calls
between them; per-call latency as the client sees it (HTTP, auth, quotas, policy, daemon,
audit) and every error counted.

The clients share the machine's cores with the server and the sessions, so two more figures
say what bounds the calls per second: the same load from lean clients (one HTTP/1.1
connection each, through h11, a tenth of ``RemoteRuntime``'s CPU per call), and the same load
through the library in process, with as many sessions and concurrent callers: the most a
server wrapping the library could reach on this machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import anyio
import h11
import httpx
from anyio.streams.text import TextReceiveStream

from caisson.bench.stats import summarize
from caisson.config import RuntimeConfig
from caisson.remote import RemoteRuntime, RemoteSession
from caisson.remote.client import API
from caisson.runtime import Runtime
from caisson.session import Session
from caisson.tools.base import ToolResult

START_TIMEOUT = 120.0
LIBRARY_CALLS = 300


async def _start_server(state: str) -> tuple[anyio.abc.Process, str, str]:
    """``caisson serve`` on a free loopback port; its URL and the admin key it printed."""
    proc = await anyio.open_process(
        [sys.executable, "-m", "caisson.interfaces.cli", "serve", "--port", "0", "--state-dir", state, "--no-mcp"],
        stderr=subprocess.DEVNULL, env={**os.environ, "CAISSON_STATE_DIR": state},
    )
    assert proc.stdout is not None
    url = key = ""
    with anyio.fail_after(START_TIMEOUT):
        async for text in TextReceiveStream(proc.stdout):
            for line in text.splitlines():
                if "listening on " in line:
                    url = line.split("listening on ", 1)[1].split()[0]
                elif "admin API key" in line:
                    key = line.rsplit(" ", 1)[1]
            if url and key:
                break
    return proc, url, key


async def bench_hosted(tenants: int = 5, sessions: int = 20, clients: int = 50, calls: int = 2000) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="caisson-bench-serve-") as state:
        async with Runtime(RuntimeConfig(state_dir=state)) as rt, rt.session() as library:
            await library.call("bash", {"command": "echo 0"})
            # Baseline beside the figure, same run: the library's own CPU for the same call,
            # taken before the server starts, with its sessions open, and after the load. A
            # machine's state drifts (the engine still removing an earlier run's containers,
            # btrfs cleaning up after them): the median of the three follows the run's.
            library_cpu_ms: list[float] = []

            async def measure_library() -> None:
                library_cpu_ms.append(await _library_cpu_per_call(rt, library, LIBRARY_CALLS))

            await measure_library()
            proc, url, admin_key = await _start_server(state)
            try:
                report = await _load(url, admin_key, tenants, sessions, clients, calls, between=measure_library)
                await measure_library()
            finally:
                proc.terminate()
                with anyio.move_on_after(60):
                    await proc.wait()
                if proc.returncode is None:
                    proc.kill()
            # With the server gone: the same load through the library, nothing else running.
            report["library_in_process"] = await _library_load(rt, sessions, clients, calls)
    server_cpu_ms = report.pop("server_cpu_seconds") * 1000 / calls
    library_median = sorted(library_cpu_ms)[1]
    report["cpu_per_call_ms"] = {
        "server": round(server_cpu_ms, 2), "library_in_process": round(library_median, 2),
        "library_in_process_samples": [round(x, 2) for x in library_cpu_ms],
        "ratio": round(server_cpu_ms / library_median, 2),
    }
    # Throughput on a shared machine follows its load: the figures carry theirs.
    report["load_average"] = {"before": load_before, "after": os.getloadavg()[0]}
    return report


async def _server_cpu(url: str) -> float:
    """The server process's CPU seconds so far, from its own /metrics."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as c:
        text = (await c.get("/metrics")).text
    for line in text.splitlines():
        if line.startswith("process_cpu_seconds_total "):
            return float(line.split()[1])
    raise RuntimeError("the server's /metrics has no process_cpu_seconds_total")


async def _library_cpu_per_call(rt: Runtime, s: Session, n: int) -> float:
    """CPU milliseconds of this process per ``bash`` call made through the library in
    process, the same call the clients make through the server."""
    started = time.process_time()
    for i in range(n):
        await s.call("bash", {"command": f"echo {i}"})
    await anyio.to_thread.run_sync(rt.audit.flush)  # the audit writer's share, as the server pays it
    return (time.process_time() - started) * 1000 / n


@dataclass
class _Drive:
    """One load: its duration, each call's latency, what went wrong, the callers' CPU."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0

    def figures(self, calls: int) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 2), "calls_per_second": round(calls / self.seconds, 1),
            "errors": len(self.errors), "error_samples": self.errors[:5],
            "clients_cpu_per_call_ms": round(self.cpu_seconds * 1000 / calls, 2),
        }


# One caller's way to make call ``i`` (``bash`` ``echo i``); it returns the answer's text.
Call = Callable[[int], Awaitable[str]]


async def _drive(clients: int, calls: int, connect: Callable[[], AbstractAsyncContextManager[Call]]) -> _Drive:
    """``calls`` calls made by ``clients`` concurrent callers sharing one sequence of calls."""
    drive = _Drive()
    counter = iter(range(calls))

    async def client() -> None:
        async with connect() as call:
            for i in counter:
                t0 = time.perf_counter()
                try:
                    text = await call(i)
                    if text.strip() != str(i):
                        drive.errors.append(f"call {i}: {text[:200]}")
                except Exception as exc:  # counted, reported; the run goes on
                    drive.errors.append(f"call {i}: {exc!r}"[:200])
                drive.latencies.append((time.perf_counter() - t0) * 1000)

    cpu_before = time.process_time()
    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(clients):
            tg.start_soon(client)
    drive.seconds = time.perf_counter() - started
    drive.cpu_seconds = time.process_time() - cpu_before
    return drive


def _answer(result: ToolResult, i: int) -> str:
    if not result.ok:
        raise RuntimeError(f"call {i} failed: {result.text[:200]}")
    return result.text


class _Session(Protocol):
    async def call(self, tool: str, args: dict[str, Any] | None = None) -> ToolResult: ...


def _through(opened: Sequence[_Session]) -> Callable[[], AbstractAsyncContextManager[Call]]:
    """Callers that take the sessions in turn (a library's, or ``RemoteRuntime``'s)."""

    @asynccontextmanager
    async def connect() -> AsyncIterator[Call]:
        async def call(i: int) -> str:
            return _answer(await opened[i % len(opened)].call("bash", {"command": f"echo {i}"}), i)

        yield call

    return connect


@asynccontextmanager
async def _lean_connection(url: str, tokens: dict[str, str]) -> AsyncIterator[Call]:
    """One keep-alive HTTP/1.1 connection to the server making calls through its API, with
    nothing of a client library on top (sessions taken in turn, each with its tenant's key)."""
    where = urlsplit(url)
    host, port = where.hostname or "127.0.0.1", where.port or 80
    ids = list(tokens)
    conn = h11.Connection(h11.CLIENT)
    async with await anyio.connect_tcp(host, port) as stream:

        async def call(i: int) -> str:
            session = ids[i % len(ids)]
            body = json.dumps({"tool": "bash", "args": {"command": f"echo {i}"}}).encode()
            headers = [
                ("Host", where.netloc), ("Authorization", f"Bearer {tokens[session]}"),
                ("Content-Type", "application/json"), ("Content-Length", str(len(body))),
            ]
            request = h11.Request(method="POST", target=f"{API}/sessions/{session}/calls", headers=headers)
            await stream.send(conn.send(request) + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
            status, chunks = 0, []
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive())
                elif isinstance(event, h11.Response):
                    status = event.status_code
                elif isinstance(event, h11.Data):
                    chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage):
                    break
            conn.start_next_cycle()
            if status != 200:
                raise RuntimeError(f"HTTP {status}: {b''.join(chunks)[:200]!r}")
            return _answer(ToolResult.model_validate_json(b"".join(chunks)), i)

        yield call


async def _library_load(rt: Runtime, sessions: int, clients: int, calls: int) -> dict[str, Any]:
    """The server's load made through the library in process: as many sessions, concurrent
    callers and calls."""
    opened: list[Session] = []
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(sessions):
                tg.start_soon(lambda: _open_into(rt, opened))

        drive = await _drive(clients, calls, _through(opened))
    finally:
        with anyio.CancelScope(shield=True):
            for s in opened:
                await s.close()
    return {"call": summarize(drive.latencies), **drive.figures(calls)}


async def _open_into(rt: Runtime, opened: list[Session]) -> None:
    opened.append(await rt.open_session())


async def _load(
    url: str, admin_key: str, tenants: int, sessions: int, clients: int, calls: int,
    between: Callable[[], Awaitable[None]],
) -> dict[str, Any]:
    """The server's sessions opened, ``between()`` (with them open, before any call), then the
    clients' calls: through ``RemoteRuntime``, then again through lean connections."""
    per_tenant = -(-sessions // tenants)
    keys: list[str] = []
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as admin:
        for n in range(tenants):
            quotas = {"max_sessions": per_tenant, "calls_per_minute": 1_000_000}
            made = (await admin.post("/tenants", json={"name": f"bench-{n}", "quotas": quotas})).json()
            keys.append((await admin.post(f"/tenants/{made['id']}/keys", json={})).json()["token"])
    runtimes = [RemoteRuntime(url, key) for key in keys]
    opened: list[RemoteSession] = []
    tokens: dict[str, str] = {}
    try:
        for rt in runtimes:
            await rt.__aenter__()
        started = time.perf_counter()

        async def open_one(i: int) -> None:
            s = await runtimes[i % tenants].open_session()
            opened.append(s)
            tokens[s.id] = keys[i % tenants]

        async with anyio.create_task_group() as tg:
            for i in range(sessions):
                tg.start_soon(open_one, i)
        open_seconds = time.perf_counter() - started
        await between()
        cpu_before = await _server_cpu(url)
        drive = await _drive(clients, calls, _through(opened))
        server_cpu = await _server_cpu(url) - cpu_before
        cpu_before = await _server_cpu(url)
        lean = await _drive(clients, calls, lambda: _lean_connection(url, tokens))
        lean_server_cpu = await _server_cpu(url) - cpu_before
    finally:
        with anyio.CancelScope(shield=True):
            for s in opened:
                await s.close()
            for rt in runtimes:
                await rt.__aexit__(None, None, None)
    return {
        "tenants": tenants, "sessions": sessions, "clients": clients, "calls": calls,
        "open_sessions_seconds": round(open_seconds, 2),
        "call": summarize(drive.latencies), **drive.figures(calls), "server_cpu_seconds": server_cpu,
        "lean_clients": {
            "call": summarize(lean.latencies), **lean.figures(calls),
            "server_cpu_per_call_ms": round(lean_server_cpu * 1000 / calls, 2),
        },
    }
