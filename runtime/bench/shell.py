"""Round-trip latency of the bash tool in its persistent mode (``caisson bench``)."""

from __future__ import annotations

from typing import Any

from caisson.bench.stats import PAUSE, measure
from caisson.session import Session


async def bench_bash(session: Session, iterations: int) -> dict[str, Any]:
    """p50/p95 ms of ``bash("true")`` as an agent makes it: validation, classification,
    policy, audit, state restore and save, one exec."""
    if session.config.stateless_bash:
        raise ValueError("bench_bash measures the persistent mode; this session has stateless_bash set")

    async def once() -> None:
        result = await session.call("bash", {"command": "true"})
        if not result.ok:
            raise RuntimeError(f"bash true failed: {result.text}")

    return {"mode": "persistent", **await measure(once, iterations), "after_pause": await measure(once, iterations, pause=PAUSE)}
