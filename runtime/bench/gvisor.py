"""gVisor beside runc (``caisson bench --only gvisor``): the per-call figures and session
starts of a gVisor session next to a runc session's, measured in the same run, with the
ratio of each pair."""

from __future__ import annotations

import json
import time
from contextlib import AsyncExitStack
from typing import Any

import anyio

from caisson.bench.baseline import docker_client
from caisson.bench.stats import measure, summarize
from caisson.config import PoolConfig, RuntimeConfig, SessionConfig
from caisson.runtime import Runtime
from caisson.session import Session

TEN_KB = "x" * 10_240
# Inside the session, no caisson on the path: a process starts /bin/true and reaps it (a vfork
# and an execve, as the daemon's clones do). Under gVisor's ptrace platform this is the floor
# beneath exec(["true"]), and it moves with the host's state from day to day.
SPAWN_FLOOR = """
import json, os, time
taken = []
for _ in range({n}):
    started = time.perf_counter()
    os.waitpid(os.posix_spawn("/bin/true", ["true"], {{}}), 0)
    taken.append((time.perf_counter() - started) * 1000)
taken.sort()
print(json.dumps({{"p50_ms": round(taken[len(taken) // 2], 3), "p95_ms": round(taken[int(len(taken) * 0.95)], 3), "n": {n}}}))
"""


async def _spawn_floor(s: Session, n: int) -> dict[str, float]:
    result = await s.exec(["python3", "-c", SPAWN_FLOOR.format(n=n)], timeout=300)
    if result.exit_code != 0:
        raise RuntimeError(f"the spawn floor's script failed: {result.stderr[-500:]}")
    return dict(json.loads(result.stdout))


async def _per_call(s: Session, iterations: int) -> dict[str, Any]:
    await s.write_file("/workspace/bench-10kb.txt", TEN_KB)
    return {
        "spawn_true_inside_no_caisson": await _spawn_floor(s, iterations),
        "exec_true": await measure(lambda: s.exec(["true"], timeout=30), iterations),
        "bash_true": await measure(lambda: s.call("bash", {"command": "true"}), iterations),
        "read_file_tool_10kb": await measure(
            lambda: s.call("read_file", {"path": "/workspace/bench-10kb.txt"}), iterations
        ),
        "write_file_tool_10kb": await measure(
            lambda: s.call("write_file", {"path": "/workspace/bench-w.txt", "content": TEN_KB}), iterations
        ),
    }


async def _starts(rt: Runtime, configs: dict[str, SessionConfig], n: int) -> dict[str, dict[str, float]]:
    """Open to first command's answer, each config in turn, so load that drifts during the run
    weighs on all of them alike."""
    samples: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(n):
        for name, config in configs.items():
            started = time.perf_counter()
            s = await rt.open_session(config)
            try:
                await s.exec(["true"], timeout=30)
                samples[name].append((time.perf_counter() - started) * 1000)
            finally:
                await s.close()
    return {name: summarize(taken) for name, taken in samples.items()}


def _cpu_ns(rt: Runtime, container_id: str) -> int:
    stats = docker_client(rt).api.stats(container_id, stream=False, one_shot=True)
    return int(stats["cpu_stats"]["cpu_usage"]["total_usage"])


async def _idle_cpu(rt: Runtime, config: SessionConfig, sessions: int, seconds: float) -> dict[str, float]:
    """The CPU an idle session spends (its daemon's watches, gVisor's own timers): the
    engine's CPU counter of each of ``sessions`` open sessions over ``seconds`` of quiet."""
    async with AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(rt.session(config)) for _ in range(sessions)]
        for s in opened:
            await s.exec(["true"], timeout=30)  # each has run a command, as a session in use has
        await anyio.sleep(1)
        ids = [s.container_id for s in opened]
        before = [await anyio.to_thread.run_sync(_cpu_ns, rt, cid) for cid in ids]
        started = time.perf_counter()
        await anyio.sleep(seconds)
        after = [await anyio.to_thread.run_sync(_cpu_ns, rt, cid) for cid in ids]
        elapsed = time.perf_counter() - started
    shares = sorted((b - a) / 1e9 / elapsed * 100 for a, b in zip(before, after, strict=True))
    return {
        "sessions": sessions,
        "seconds": round(elapsed, 1),
        "cpu_percent_of_a_core_per_session_mean": round(sum(shares) / len(shares), 3),
        "cpu_percent_of_a_core_per_session_max": round(shares[-1], 3),
        "cpu_percent_of_a_core_all_sessions": round(sum(shares), 2),
    }


async def _pool_acquire(config: SessionConfig, n: int) -> dict[str, float]:
    """From taking a warm container to its first command's answer, the pool full each time."""
    async with Runtime(RuntimeConfig(gc_on_start=False, pool=PoolConfig(size=2, session=config))) as pooled:
        samples = []
        for _ in range(n):
            await pooled.pool_ready(timeout=120)
            started = time.perf_counter()
            s = await pooled.open_session(config)
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
        for name, summary in (await _starts(rt, {"runc": runc, "gvisor": gvisor}, n)).items():
            result[name]["cold_start_to_first_command"] = summary
        result["runc"]["idle_cpu_10_sessions"] = await _idle_cpu(rt, runc, 10, 10.0)
        result["gvisor"]["idle_cpu_10_sessions"] = await _idle_cpu(rt, gvisor, 10, 10.0)
    for name, config in (("runc", runc), ("gvisor", gvisor)):
        result[name]["pool_acquire_to_first_command"] = await _pool_acquire(config, max(5, iterations // 20))
    result["ratio_gvisor_to_runc_p50"] = {
        name: round(result["gvisor"][name]["p50_ms"] / max(result["runc"][name]["p50_ms"], 1e-6), 2)
        for name in result["runc"]
        if "p50_ms" in result["runc"][name]
    }
    return result
