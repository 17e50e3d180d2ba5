"""Latency statistics shared by every `caisson bench` group."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any


def summarize(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(p95, 3),
        "n": len(ordered),
    }


async def measure(fn: Callable[[], Awaitable[Any]], iterations: int, warmup: int = 5) -> dict[str, float]:
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        await fn()
        samples.append((time.perf_counter() - start) * 1000)
    return summarize(samples)


def measure_sync(fn: Callable[[], Any], iterations: int, warmup: int = 3) -> dict[str, float]:
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return summarize(samples)
