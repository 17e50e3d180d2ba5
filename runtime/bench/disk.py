"""What bounding sessions' disks costs: the soft watch with 50 sessions (its thread's CPU per
round and the slowest single check), beside what the watch did before, one engine listing
sized for all of them (the named baseline, same run); and cold start on the engine's
hard-limit storage, beside overlay2 only where an overlay2 engine exists."""

from __future__ import annotations

from typing import Any

import anyio

from caisson.bench.baseline import docker_backend, docker_client
from caisson.bench.pool import to_first_command
from caisson.bench.stats import burst, measure_sync, summarize
from caisson.config import RuntimeConfig
from caisson.errors import CaissonError
from caisson.runtime import Runtime
from caisson.session import Session

SESSIONS = 50
ROUNDS = 20


async def bench_disk(iterations: int, state_dir: str | None = None) -> dict[str, Any]:
    base = {"state_dir": state_dir} if state_dir else {}
    result: dict[str, Any] = {}
    async with Runtime(RuntimeConfig(**base, soft_disk_watch=True, gc_on_start=False)) as rt:
        result["soft_watch_50_sessions"] = await _soft_watch(rt)
    async with Runtime(RuntimeConfig(**base, gc_on_start=False)) as rt:
        facts = await rt.backend.facts()
        cold: list[float] = []
        for _ in range(max(5, iterations // 20)):
            await to_first_command(rt, cold)
        result["cold_start"] = {
            "storage_driver": facts.storage_driver,
            "disk_quota": facts.disk_quota,
            "to_first_command": summarize(cold),
            # Only an engine that exists is measured: a second engine with overlay2 beside this one.
            "overlay2_beside": (
                None if facts.storage_driver == "overlay2" else "not measured: this host runs no overlay2 engine beside it"
            ),
        }
    return result


async def _soft_watch(rt: Runtime) -> dict[str, Any]:
    watch = docker_backend(rt).disk_watch
    if watch is None:
        raise CaissonError("the soft watch is not running")
    opened: list[Session] = []

    async def open_one(_: int) -> None:
        opened.append(await rt.open_session())

    _, failures = await burst(SESSIONS, open_one)
    try:
        await anyio.sleep(watch.period * (ROUNDS + 2))
        rounds = [r for r in list(watch.rounds) if r.sessions == len(opened)][-ROUNDS:]
        listing = await anyio.to_thread.run_sync(_sized_listing, rt, [s.container_id for s in opened])
    finally:
        with anyio.CancelScope(shield=True):
            async with anyio.create_task_group() as tg:
                for s in opened:
                    tg.start_soon(s.close)
    return {
        "sessions": len(opened),
        "open_failures": failures,
        "measure": watch.sizes.mechanism,
        "period_s": watch.period,
        "cpu_per_round": summarize([r.cpu_s * 1000 for r in rounds]),
        "slowest_check_per_round": summarize([r.slowest_s * 1000 for r in rounds]),
        # The old watch: the engine sized every session's layer in one listing, each round.
        "engine_sized_listing_baseline": listing,
    }


def _sized_listing(rt: Runtime, container_ids: list[str]) -> dict[str, Any]:
    """The old watch's round: the engine sizes every session's layer in one listing (slow on a
    busy engine: it may pass the client's timeout, which is then the figure)."""
    client = docker_client(rt)
    try:
        return measure_sync(lambda: client.api.containers(filters={"id": container_ids}, size=True), 3, warmup=0)
    except Exception as exc:  # the engine's timeout is the figure here, whatever the client raises for it
        return {"failed": str(exc)[:200]}
