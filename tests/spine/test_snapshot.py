"""Snapshots and forks: a session's files carried into new sessions, each fork isolated."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import Runtime
from runtime.config import RuntimeConfig

pytestmark = pytest.mark.anyio


async def test_fork_carries_state_and_forks_are_isolated(tmp_path: Path) -> None:
    async with Runtime(RuntimeConfig(state_dir=str(tmp_path))) as rt:
        async with rt.session() as original:
            await original.write_file("/workspace/state.txt", "before the fork\n")
            await original.call("bash", {"command": "export CARRIED=yes; cd /workspace"})
            forks = await rt.fork(original, 2)
            try:
                a, b = forks
                assert (await a.read_file("/workspace/state.txt")) == b"before the fork\n"
                await a.write_file("/workspace/state.txt", "changed in a\n")
                assert (await b.read_file("/workspace/state.txt")) == b"before the fork\n"
                assert (await original.read_file("/workspace/state.txt")) == b"before the fork\n"
                assert a.container_id != b.container_id != original.container_id
            finally:
                for fork in forks:
                    await fork.close()
        snapshots = rt.client.images.list(name="caisson/snapshot")
        assert snapshots
    # Leaving the runtime removed the snapshots it made.
    async with Runtime(RuntimeConfig(state_dir=str(tmp_path), gc_on_start=False)) as check:
        mine = [i for i in check.client.images.list(name="caisson/snapshot") if i in snapshots]
        assert mine == []
