"""Session start with and without the warm pool, beside raw ``docker create+start+exec``
measured in the same run, and a burst of sessions taken from a full pool."""

from __future__ import annotations

import time
from typing import Any

import anyio
import docker

from caisson.bench.baseline import default_image, docker_client
from caisson.bench.stats import burst, measure_sync, summarize
from caisson.config import PoolConfig, RuntimeConfig
from caisson.runtime import Runtime

BURST = 100


async def to_first_command(rt: Runtime, samples: list[float]) -> None:
    started = time.perf_counter()
    s = await rt.open_session()
    try:
        await s.exec(["true"], timeout=30)
        samples.append((time.perf_counter() - started) * 1000)
    finally:
        await s.close()


def _raw_docker(client: docker.DockerClient) -> None:
    """What starting a container costs without caisson: create, start, one exec, remove."""
    container = client.containers.create(default_image(), ["sleep", "60"], network_mode="none")
    try:
        container.start()
        container.exec_run(["true"])
    finally:
        container.remove(force=True)


async def bench_pool(iterations: int, state_dir: str | None = None) -> dict[str, Any]:
    n = max(5, iterations // 20)
    base = {"state_dir": state_dir} if state_dir else {}
    result: dict[str, Any] = {}
    async with Runtime(RuntimeConfig(**base, pool=PoolConfig(size=4))) as rt:
        pooled: list[float] = []
        for _ in range(n):
            await rt.pool_ready()
            await to_first_command(rt, pooled)
        result["pool_acquire_to_first_command"] = summarize(pooled)
        cold: list[float] = []
        async with Runtime(RuntimeConfig(**base, gc_on_start=False)) as plain:
            for _ in range(n):
                await to_first_command(plain, cold)
        result["cold_start_to_first_command"] = summarize(cold)
        result["raw_docker_create_start_exec_baseline"] = await anyio.to_thread.run_sync(
            lambda: measure_sync(lambda: _raw_docker(docker_client(rt)), n, warmup=1)
        )
    raw = result["raw_docker_create_start_exec_baseline"]["p50_ms"]
    result["cold_vs_raw_docker_p50"] = round(result["cold_start_to_first_command"]["p50_ms"] / raw, 2)

    async with Runtime(RuntimeConfig(**base, pool=PoolConfig(size=BURST))) as rt:
        fill_started = time.perf_counter()
        full = await rt.pool_ready(timeout=600)
        fill_seconds = time.perf_counter() - fill_started
        samples: list[float] = []
        wall, failures = await burst(BURST, lambda _: to_first_command(rt, samples))
        result["burst_from_full_pool"] = {
            "sessions": BURST,
            "pool_was_full": full,
            "pool_fill_seconds": round(fill_seconds, 2),
            # Every session had answered its first command by then (closing them is not counted).
            "all_ready_seconds": round(max(samples) / 1000, 2) if samples else None,
            "wall_seconds_with_closing": round(wall, 2),
            "per_session": summarize(samples) if samples else None,
            "failures": failures,
        }
    return result
