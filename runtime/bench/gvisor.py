"""gVisor beside runc (``caisson bench --only gvisor``): the per-call figures and session
starts of a gVisor session next to a runc session's, measured in the same run, with the
ratio of each pair."""

from __future__ import annotations

import time
from typing import Any

from caisson.bench.stats import measure, summarize
from caisson.config import PoolConfig, RuntimeConfig, SessionConfig
from caisson.runtime import Runtime
from caisson.session import Session

TEN_KB = "x" * 10_240


async def _per_call(s: Session, iterations: int) -> dict[str, Any]:
    await s.write_file("/workspace/bench-10kb.txt", TEN_KB)
    return {
        "exec_true": await measure(lambda: s.exec(["true"], timeout=30), iterations),
        "bash_true": await measure(lambda: s.call("bash", {"command": "true"}), iterations),
        "read_file_tool_10kb": await measure(
            lambda: s.call("read_file", {"path": "/workspace/bench-10kb.txt"}), iterations
        ),
        "write_file_tool_10kb": await measure(
            lambda: s.call("write_file", {"path": "/workspace/bench-w.txt", "content": TEN_KB}), iterations
        ),
    }


async def _starts(rt: Runtime, config: SessionConfig, n: int) -> dict[str, float]:
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        s = await rt.open_session(config)
        try:
            await s.exec(["true"], timeout=30)
            samples.append((time.perf_counter() - started) * 1000)
        finally:
            await s.close()
    return summarize(samples)


async def bench_gvisor(iterations: int) -> dict[str, Any]:
    runc, gvisor = SessionConfig(), SessionConfig(gvisor=True)
    result: dict[str, Any] = {}
    async with Runtime() as rt:
        async with rt.session(runc) as a, rt.session(gvisor) as b:
            result["runc"] = await _per_call(a, iterations)
            result["gvisor"] = await _per_call(b, iterations)
        n = max(5, iterations // 40)
        result["runc"]["cold_start_to_first_command"] = await _starts(rt, runc, n)
        result["gvisor"]["cold_start_to_first_command"] = await _starts(rt, gvisor, n)
    async with Runtime(RuntimeConfig(gc_on_start=False, pool=PoolConfig(size=2, session=gvisor))) as pooled:
        samples = []
        for _ in range(max(5, iterations // 20)):
            await pooled.pool_ready(timeout=120)
            started = time.perf_counter()
            s = await pooled.open_session(gvisor)
            try:
                await s.exec(["true"], timeout=30)
                samples.append((time.perf_counter() - started) * 1000)
            finally:
                await s.close()
        result["gvisor"]["pool_acquire_to_first_command"] = summarize(samples)
    result["ratio_gvisor_to_runc_p50"] = {
        name: round(result["gvisor"][name]["p50_ms"] / max(result["runc"][name]["p50_ms"], 1e-6), 2)
        for name in result["runc"]
    }
    return result
