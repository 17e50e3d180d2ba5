"""gVisor sessions from the warm pool: handed out warm, over the attach stream the pool kept
(no request to the engine when a session takes one), falling back to a cold start when the
pooled daemon died; and a gVisor session that asks for a network the engine cannot give is
refused at open, saying what to do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from caisson import Runtime
from caisson.config import PoolConfig, RuntimeConfig, SessionConfig
from caisson.docker.containers import LABEL_OWNER, gvisor_without_network
from caisson.errors import SessionError

pytestmark = pytest.mark.anyio

GVISOR = SessionConfig(gvisor=True)


@pytest.fixture(autouse=True)
def _current_image(rt: Runtime) -> None:
    """The pools below start containers of the current daemon's image: the shared runtime builds it."""


def owned(rt: Runtime) -> set[str]:
    rows = rt.backend.client.api.containers(all=True, filters={"label": f"{LABEL_OWNER}={rt.config.owner}"})
    return {row["Id"] for row in rows}


async def test_gvisor_sessions_take_warm_pooled_containers_over_the_kept_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = RuntimeConfig(state_dir=str(tmp_path), pool=PoolConfig(size=2, session=GVISOR))
    async with Runtime(config) as rt:
        assert await rt.pool_ready(timeout=120)
        pooled = owned(rt)
        attaches: list[str] = []
        attach = rt.backend.attach

        async def counted(container_id: str, **kwargs: Any) -> Any:
            attaches.append(container_id)
            return await attach(container_id, **kwargs)

        monkeypatch.setattr(rt.backend, "attach", counted)
        async with rt.session(GVISOR) as s:
            assert s.container_id in pooled
            assert attaches == []  # the pool's stream, already answered by a warm daemon
            assert (await s.ping()).levels == "views"
            assert (await s.exec(["echo", "warm"])).stdout == "warm\n"
            listed = await s.call("bash", {"command": "ls /workspace && echo done"})
            assert listed.ok and "done" in listed.text

        # A pooled daemon that died: its kept stream is dead, and the session starts cold.
        assert await rt.pool_ready(timeout=120)
        victim = next(iter(owned(rt) - {s.container_id}))
        rt.backend.client.api.kill(victim)
        await anyio.sleep(0.5)
        async with rt.session(GVISOR) as s:
            assert s.container_id != victim
            assert (await s.exec("echo alive")).stdout == "alive\n"


async def test_gvisor_with_a_network_the_engine_cannot_give_is_refused_at_open(tmp_path: Path) -> None:
    async with Runtime(RuntimeConfig(state_dir=str(tmp_path))) as rt:
        if not gvisor_without_network(rt.backend.client):
            pytest.fail("this test needs an engine whose runsc runs with --network=none, as scripts/setup.sh sets up")
        before = owned(rt)
        with pytest.raises(SessionError, match="--network=none") as refused:
            await rt.open_session(gvisor=True, network=True)
        assert "egress" in str(refused.value)
        assert owned(rt) == before
        # Without the network, the same session opens.
        async with rt.session(gvisor=True) as s:
            assert (await s.exec(["true"])).exit_code == 0
