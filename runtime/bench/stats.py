"""Latency statistics shared by every `caisson bench` group."""

from __future__ import annotations

import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio


def summarize(samples_ms: list[float]) -> dict[str, float]:
    ordered = sorted(samples_ms)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return {
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(p95, 3),
        "n": len(ordered),
    }


# An agent calls a tool after a model turn, with the sandbox idle meanwhile: figures "after a
# pause" wait this long (untimed) before each call, where back-to-back calls show throughput.
PAUSE = 0.005


async def measure(
    fn: Callable[[], Awaitable[Any]], iterations: int, warmup: int = 5, pause: float = 0.0
) -> dict[str, float]:
    for _ in range(warmup):
        await fn()
    samples = []
    for _ in range(iterations):
        if pause:
            await anyio.sleep(pause)
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


async def burst(n: int, work: Callable[[int], Awaitable[Any]]) -> tuple[float, list[str]]:
    """``work(0..n-1)`` all at once: wall seconds and the failures (counted and reported: one
    bad run must not hide the others)."""
    failures: list[str] = []

    async def one(i: int) -> None:
        try:
            await work(i)
        except Exception as exc:
            failures.append(repr(exc)[:200])

    started = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return time.perf_counter() - started, failures
