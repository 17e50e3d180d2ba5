"""Round-trip latency of the bash tool in its persistent mode (``caisson bench``)."""

from __future__ import annotations

import statistics
import time
from typing import Any

from runtime.session import Session
from runtime.tools.shell import BashInput, bash

WARMUP = 5


async def bench_bash(session: Session, iterations: int) -> dict[str, Any]:
    """p50/p95 ms of ``bash("true")`` through the tool handler, state restore and save
    included (no policy or audit: that is the dispatcher's cost, measured separately)."""
    if session.config.stateless_bash:
        raise ValueError("bench_bash measures the persistent mode; this session has stateless_bash set")
    args = BashInput(command="true")
    samples: list[float] = []
    for i in range(WARMUP + iterations):
        start = time.perf_counter()
        result = await bash(session, args)
        elapsed = (time.perf_counter() - start) * 1000
        if not result.ok:
            raise RuntimeError(f"bash true failed: {result.text}")
        if i >= WARMUP:
            samples.append(elapsed)
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "mode": "persistent",
        "p50_ms": round(statistics.median(ordered), 3),
        "p95_ms": round(p95, 3),
        "n": len(ordered),
    }
