"""What bounding sessions' disks costs: the soft watch with 50 sessions (its thread's CPU per
round and the slowest single check), beside what the watch did before, one engine listing
sized for all of them (the named baseline, same run); and cold start on the engine's
hard-limit storage beside overlay2's, measured in the same run on an engine the user names or
on a throwaway one the bench starts (bench/engine.py), interleaved so that the machine's
drifting load weighs on both alike."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio

from caisson.bench.baseline import copy_default_image, docker_backend, docker_client
from caisson.bench.engine import progress, throwaway_overlay2
from caisson.bench.pool import to_first_command
from caisson.bench.stats import burst, measure_sync, summarize
from caisson.config import RuntimeConfig
from caisson.errors import CaissonError
from caisson.runtime import Runtime
from caisson.session import Session

SESSIONS = 50
ROUNDS = 20


async def bench_disk(iterations: int, state_dir: str | None = None, overlay2_engine: str | None = None) -> dict[str, Any]:
    base = {"state_dir": state_dir} if state_dir else {}
    async with Runtime(RuntimeConfig(**base, soft_disk_watch=True, gc_on_start=False)) as rt:
        soft_watch = await _soft_watch(rt)
    return {"soft_watch_50_sessions": soft_watch, "cold_start": await bench_cold_start(iterations, state_dir, overlay2_engine)}


async def bench_cold_start(iterations: int, state_dir: str | None = None, overlay2_engine: str | None = None) -> dict[str, Any]:
    """Cold start to the first command on this engine and, where it is not overlay2 itself,
    on overlay2 beside it: ``overlay2_engine``, the address of one, or by default a throwaway
    one where the bench may start it (root, dockerd and containerd), else why not."""
    base = {"state_dir": state_dir} if state_dir else {}
    n = max(5, iterations // 20)
    async with Runtime(RuntimeConfig(**base, gc_on_start=False)) as rt, AsyncExitStack() as stack:
        facts = await rt.backend.facts()
        report: dict[str, Any] = {"storage_driver": facts.storage_driver, "disk_quota": facts.disk_quota}
        beside: Runtime | None = None
        if facts.storage_driver == "overlay2":
            report["overlay2_beside"] = "not measured: this engine runs overlay2 itself"
        else:
            try:
                beside = await stack.enter_async_context(overlay2_runtime(rt, overlay2_engine))
            except CaissonError as exc:
                progress(f"cold start on overlay2 not measured: {exc}")
                report["overlay2_beside"] = f"not measured: {exc}"
        engines = [rt] if beside is None else [rt, beside]
        samples: list[list[float]] = [[] for _ in engines]
        progress(f"measuring cold start, {n} sessions on each of {len(engines)} engine(s), interleaved")
        for engine in engines:
            await to_first_command(engine, [])  # untimed: each engine's first container of the run
        for i in range(n):
            # Taking turns first: neither engine always follows the other's close.
            for k in range(len(engines)) if i % 2 == 0 else reversed(range(len(engines))):
                await to_first_command(engines[k], samples[k])
        report["to_first_command"] = summarize(samples[0])
        if beside is not None:
            o2 = summarize(samples[1])
            report["overlay2_beside"] = {
                "engine": overlay2_engine or "throwaway",
                "to_first_command": o2,
                "ratio_p50": round(report["to_first_command"]["p50_ms"] / o2["p50_ms"], 2),
                "ratio_p95": round(report["to_first_command"]["p95_ms"] / o2["p95_ms"], 2),
                "target_p50": 1.3,
            }
    return report


@asynccontextmanager
async def overlay2_runtime(rt: Runtime, named: str | None) -> AsyncIterator[Runtime]:
    """A runtime on the named overlay2 engine, or on a throwaway one, holding the same image."""
    async with AsyncExitStack() as stack:
        host = named or await stack.enter_async_context(throwaway_overlay2(rt.config.state_dir))
        beside = await stack.enter_async_context(Runtime(RuntimeConfig(state_dir=rt.config.state_dir, docker_host=host, gc_on_start=False)))
        driver = (await beside.backend.facts()).storage_driver
        if driver != "overlay2":
            raise CaissonError(f"the engine at {host} runs {driver}, not overlay2: name an overlay2 engine")
        await rt.backend.prepare_image(None)
        progress("copying the sandbox image into the overlay2 engine")
        await anyio.to_thread.run_sync(copy_default_image, rt, beside)
        yield beside


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
