"""Round-trip latency of the bash tool in its persistent mode (``caisson bench``)."""

from __future__ import annotations

from typing import Any

from runtime.benchstats import measure
from runtime.session import Session
from runtime.tools.shell import BashInput, bash


async def bench_bash(session: Session, iterations: int) -> dict[str, Any]:
    """p50/p95 ms of ``bash("true")`` through the tool handler, state restore and save
    included (no policy or audit: that is the dispatcher's cost, measured separately)."""
    if session.config.stateless_bash:
        raise ValueError("bench_bash measures the persistent mode; this session has stateless_bash set")
    args = BashInput(command="true")

    async def once() -> None:
        result = await bash(session, args)
        if not result.ok:
            raise RuntimeError(f"bash true failed: {result.text}")

    return {"mode": "persistent", **await measure(once, iterations)}
