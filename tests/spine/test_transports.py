"""Both ways to the daemon carry the same sessions: its unix socket (the local default) and
the attach stream (remote engines, gVisor, or asked for); a reattaching controller takes
over from one that still holds the socket."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from caisson import Runtime
from caisson.config import PoolConfig, RuntimeConfig, SessionConfig
from caisson.errors import DaemonDied
from caisson.transport.attach import AttachStream
from caisson.transport.unix import UnixStream

pytestmark = pytest.mark.anyio


async def _works(rt: Runtime, **overrides: object) -> type:
    async with rt.session(**overrides) as s:
        r = await s.exec("head -c 300000 /dev/zero | tr '\\0' x; echo; echo err >&2", timeout=20)
        assert len(r.stdout) == 300001 and r.stderr == "err\n"
        await s.write_file("/workspace/f", b"\0" * 100_000)
        assert await s.read_file("/workspace/f") == b"\0" * 100_000
        return type(s.channel.transport)


async def test_the_socket_by_default_and_the_attach_stream_when_asked(rt: Runtime, tmp_path: Path) -> None:
    assert await _works(rt) is UnixStream
    async with Runtime(RuntimeConfig(state_dir=str(tmp_path), transport="attach", gc_on_start=False)) as attach:
        assert await _works(attach) is AttachStream


async def test_gvisor_sessions_use_the_attach_stream(rt: Runtime) -> None:
    assert await _works(rt, gvisor=True) is AttachStream


async def test_pooled_sessions_use_the_socket(tmp_path: Path) -> None:
    pool = PoolConfig(size=1, session=SessionConfig())
    async with Runtime(RuntimeConfig(state_dir=str(tmp_path), pool=pool, gc_on_start=False)) as rt:
        assert await rt.pool_ready(timeout=60)
        assert await _works(rt) is UnixStream


async def test_a_reattaching_controller_takes_over_the_socket(rt: Runtime, tmp_path: Path) -> None:
    first = Runtime(RuntimeConfig(state_dir=str(tmp_path), gc_on_start=False))
    await first.__aenter__()
    s = await first.open_session()
    try:
        task = await s.spawn("echo kept; sleep 60")
        # The first controller still holds its connection (hung, say) when another reattaches.
        again = await rt.reattach(s.id)
        try:
            assert isinstance(again.channel.transport, UnixStream)
            assert (await again.exec(["echo", "mine"])).stdout == "mine\n"
            out = await again.task_read(task.task_id, wait=2)
            assert out.stdout == "kept\n" and out.running
            # The one taken over learns so at once, not at a deadline.
            with anyio.fail_after(5), pytest.raises(DaemonDied):
                await s.exec(["true"])
        finally:
            await again.close()
    finally:
        first._sessions.clear()
        await first.__aexit__(None, None, None)
