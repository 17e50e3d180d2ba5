"""The warm pool: sessions take started containers and bind late; a container serves one
session only; what does not fit starts cold; nothing is left behind."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from caisson import Runtime
from caisson.config import Limits, PoolConfig, RuntimeConfig, SessionConfig
from caisson.docker.containers import LABEL_OWNER

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _current_image(rt: Runtime) -> None:
    """The pools below start containers of the current daemon's image: the shared runtime builds it."""


def owned(rt: Runtime) -> set[str]:
    rows = rt.backend.client.api.containers(all=True, filters={"label": f"{LABEL_OWNER}={rt.config.owner}"})
    return {row["Id"] for row in rows}


async def test_sessions_take_pooled_containers_and_bind_late(tmp_path: Path) -> None:
    config = RuntimeConfig(state_dir=str(tmp_path), pool=PoolConfig(size=3))
    async with Runtime(config) as rt:
        assert await rt.pool_ready(timeout=120)
        pooled = owned(rt)
        assert len(pooled) == 3

        async with rt.session(profile="amp", tenant="acme") as s:
            assert s.container_id in pooled
            assert s.config.tenant == "acme" and {t["name"] for t in s.tools("mcp")} >= {"Bash", "Read"}
            assert (await s.call("Bash", {"cmd": "echo from the pool"})).ok
            await s.write_file("/workspace/left-behind.txt", "state of the first session")
            first = s.container_id

        # Used once: the next session gets another container, without the first one's files.
        async with rt.session() as s:
            assert s.container_id != first and s.container_id in pooled | owned(rt)
            assert not (await s.stat("/workspace/left-behind.txt")).exists

        # A session whose container would differ starts cold; the pool is not touched.
        before = rt.backend._pool.ready if rt.backend._pool else 0
        async with rt.session(limits=Limits(memory="1g")) as s:
            assert s.container_id not in pooled
        assert rt.backend._pool is not None and rt.backend._pool.ready >= before

        assert await rt.pool_ready(timeout=120)
        assert first not in owned(rt)
    # Leaving the runtime removes the idle pooled containers too.
    async with Runtime(RuntimeConfig(state_dir=str(tmp_path), gc_on_start=False)) as check:
        rows = check.backend.client.api.containers(all=True, filters={"label": f"{LABEL_OWNER}={config.owner}"})
        assert rows == []


async def test_a_dead_pooled_container_falls_back_to_a_cold_start(tmp_path: Path) -> None:
    config = RuntimeConfig(state_dir=str(tmp_path), pool=PoolConfig(size=1, session=SessionConfig()))
    async with Runtime(config) as rt:
        assert await rt.pool_ready(timeout=120)
        [victim] = owned(rt)
        rt.backend.client.api.kill(victim)
        await anyio.sleep(0.5)
        started = time.monotonic()
        async with rt.session() as s:
            took = time.monotonic() - started
            print(f"a session asked for when the pooled container was dead: started cold in {took:.1f} s")
            assert s.container_id != victim
            assert (await s.exec("echo alive")).stdout == "alive\n"
        # Before, it first waited out the whole start timeout (30 s) for the dead daemon.
        assert took < config.start_timeout / 2
