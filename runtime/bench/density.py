"""How many idle sessions a host holds: open N at once, then the host memory each costs,
the controller's share (its RSS growth / N) plus the container's own processes (init, the
daemon, its spawners) as their proportional set size (shared pages, such as the Python
binary all sessions map, split among their users), read from the host's /proc through the
containers' cgroups (a local engine only)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import anyio

from caisson.bench.stats import burst
from caisson.runtime import Runtime
from caisson.session import Session


def _proc_kib(pid: int | str, file: str, field: str) -> int:
    """A ``field: N kB`` line of ``/proc/<pid>/<file>`` (0 when the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/{file}").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _container_pids(container_id: str) -> list[str]:
    """Host pids in a container's cgroup (v1 or v2 layouts Docker uses)."""
    for path in (
        f"/sys/fs/cgroup/pids/docker/{container_id}/cgroup.procs",
        f"/sys/fs/cgroup/memory/docker/{container_id}/cgroup.procs",
        f"/sys/fs/cgroup/system.slice/docker-{container_id}.scope/cgroup.procs",
        f"/sys/fs/cgroup/docker/{container_id}/cgroup.procs",
    ):
        try:
            return Path(path).read_text().split()
        except OSError:
            continue
    return []


async def bench_density(sessions: int = 100) -> dict[str, Any]:
    async with Runtime(gc_on_start=False) as rt:
        # One session first, so imports and the engine connection are not counted per session.
        async with rt.session() as warm:
            await warm.exec(["true"])
        before = _proc_kib("self", "status", "VmRSS")
        opened: list[Session] = []

        async def open_one(_: int) -> None:
            s = await rt.open_session()
            opened.append(s)
            await s.exec(["true"])

        opening, failures = await burst(sessions, open_one)
        try:
            await anyio.sleep(2)  # idle: let start-up garbage settle
            controller = max(0, _proc_kib("self", "status", "VmRSS") - before) / max(1, len(opened))
            inside = [sum(_proc_kib(p, "smaps_rollup", "Pss") for p in _container_pids(s.container_id)) for s in opened]
            alive = sum(1 for s in opened if not s.closed and s.channel.alive)
        finally:
            with anyio.CancelScope(shield=True):
                for s in opened:
                    await s.close()
    mb = sorted(kib / 1024 for kib in inside) or [0.0]
    container_mb = statistics.mean(mb)
    return {
        "sessions": sessions,
        "opened": len(opened),
        "alive_after_idle": alive,
        "failures": failures,
        "open_all_seconds": round(opening, 2),
        "controller_mb_per_session": round(controller / 1024, 2),
        "container_processes_pss_mb": {
            "p50": round(statistics.median(mb), 2), "p95": round(mb[int(0.95 * (len(mb) - 1))], 2)
        },
        "host_mb_per_session": round(controller / 1024 + container_mb, 2),
        "target_host_mb_per_session": 15,
    }
