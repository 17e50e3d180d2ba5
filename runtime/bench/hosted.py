"""Bench group 'hosted': ``caisson serve`` under load, in its own process as deployed. Five
tenants, twenty sessions, fifty concurrent clients (``RemoteRuntime``) making 2,000 tool calls
between them; per-call latency as the client sees it (HTTP, auth, quotas, policy, daemon,
audit) and every error counted."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
from anyio.streams.text import TextReceiveStream

from caisson.bench.stats import summarize
from caisson.config import RuntimeConfig
from caisson.remote import RemoteRuntime, RemoteSession
from caisson.runtime import Runtime
from caisson.session import Session

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


async def _load(
    url: str, admin_key: str, tenants: int, sessions: int, clients: int, calls: int,
    between: Callable[[], Awaitable[None]],
) -> dict[str, Any]:
    """The server's sessions opened, ``between()`` (with them open, before any call), then the
    clients' calls."""
    per_tenant = -(-sessions // tenants)
    keys: list[str] = []
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {admin_key}"}, timeout=60) as admin:
        for n in range(tenants):
            quotas = {"max_sessions": per_tenant, "calls_per_minute": 1_000_000}
            made = (await admin.post("/tenants", json={"name": f"bench-{n}", "quotas": quotas})).json()
            keys.append((await admin.post(f"/tenants/{made['id']}/keys", json={})).json()["token"])
    runtimes = [RemoteRuntime(url, key) for key in keys]
    opened: list[RemoteSession] = []
    latencies: list[float] = []
    errors: list[str] = []
    try:
        for rt in runtimes:
            await rt.__aenter__()
        started = time.perf_counter()

        async def open_one(i: int) -> None:
            opened.append(await runtimes[i % tenants].open_session())

        async with anyio.create_task_group() as tg:
            for i in range(sessions):
                tg.start_soon(open_one, i)
        open_seconds = time.perf_counter() - started
        await between()

        counter = iter(range(calls))

        async def client() -> None:
            for i in counter:  # the clients share one sequence of calls
                s = opened[i % len(opened)]
                t0 = time.perf_counter()
                try:
                    result = await s.call("bash", {"command": f"echo {i}"})
                    if not result.ok or result.text.strip() != str(i):
                        errors.append(f"call {i}: {result.text[:200]}")
                except Exception as exc:  # counted, reported; the run goes on
                    errors.append(f"call {i}: {exc!r}"[:200])
                latencies.append((time.perf_counter() - t0) * 1000)

        cpu_before = await _server_cpu(url)
        clients_cpu_before = time.process_time()
        started = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(clients):
                tg.start_soon(client)
        seconds = time.perf_counter() - started
        clients_cpu = time.process_time() - clients_cpu_before
        server_cpu = await _server_cpu(url) - cpu_before
    finally:
        with anyio.CancelScope(shield=True):
            for s in opened:
                await s.close()
            for rt in runtimes:
                await rt.__aexit__(None, None, None)
    return {
        "tenants": tenants, "sessions": sessions, "clients": clients, "calls": calls,
        "open_sessions_seconds": round(open_seconds, 2),
        "call": summarize(latencies), "seconds": round(seconds, 2), "calls_per_second": round(calls / seconds, 1),
        "errors": len(errors), "error_samples": errors[:5], "server_cpu_seconds": server_cpu,
        # The load generator shares the machine's cores with the server and the sessions:
        # its own CPU per call says how much of the throughput it takes.
        "clients_cpu_per_call_ms": round(clients_cpu * 1000 / calls, 2),
    }
