"""The host's threads are shared by every gVisor session of a local engine (16 × limits.pids,
at least 2,048, each may hold): a new gVisor session that would take their limits together past the
runtime's share of the host's pid_max is refused with an error that says what to do. Tested
with a small share rather than many sessions; runc sessions do not count against it."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from anyio.streams.text import TextReceiveStream

from caisson import Runtime, RuntimeConfig
from caisson.config import PoolConfig, SessionConfig
from caisson.docker import host_threads
from caisson.docker.containers import LABEL_OWNER, gvisor_host_threads
from caisson.errors import HostLimit

pytestmark = [pytest.mark.anyio, pytest.mark.exclusive]

SMALL = 64  # limits.pids: the least host threads under gVisor (2,048)


async def test_gvisor_sessions_past_the_hosts_thread_budget_are_refused(rt: Runtime, tmp_path: Path) -> None:
    client = rt.backend.client  # type: ignore[attr-defined]
    most = host_threads.host_budget(1.0)
    assert most is not None, "the host's kernel.pid_max is unreadable"
    # Room for 1,000 host threads: less than one default gVisor session (8,192).
    share = 1000 / most
    async with rt.session(gvisor=True, limits={"pids": SMALL}) as held_open:
        sessions, threads = host_threads.held(client)
        assert sessions >= 1 and threads >= gvisor_host_threads(SMALL), (sessions, threads)
        async with Runtime(RuntimeConfig(state_dir=str(tmp_path), gc_on_start=False, gvisor_host_threads_share=share)) as small:
            tried = landed = 0
            for limits in ({}, {"pids": SMALL}):
                tried += 1
                try:
                    async with small.session(gvisor=True, limits=limits):
                        landed += 1
                except HostLimit as exc:
                    print(f"gVisor session with {limits or 'default limits'}: refused: {exc}")
                    assert "limits.pids" in str(exc) and f"budget of {int(most * share)}" in str(exc), exc
            # runc sessions hold no gVisor threads: the budget does not apply.
            async with small.session(limits={"pids": SMALL}) as runc:
                assert (await runc.exec("echo runc")).stdout == "runc\n"
        assert (await held_open.exec("echo held")).stdout == "held\n"
    print(f"host thread budget {int(most * share)} of {most}: tried {tried}, landed {landed} (sessions opened past it)")
    assert landed == 0


async def test_a_warm_pool_refills_only_within_the_hosts_thread_budget(rt: Runtime, tmp_path: Path) -> None:
    """The pool's containers are admitted as cold opens are: with room for one more small
    gVisor session beside the engine's others, a pool of two holds one and stays at one."""
    client = rt.backend.client  # type: ignore[attr-defined]
    most = host_threads.host_budget(1.0)
    assert most is not None
    _, threads = host_threads.held(client)
    share = (threads + gvisor_host_threads(SMALL) + 100) / most
    config = RuntimeConfig(
        state_dir=str(tmp_path), gc_on_start=False, gvisor_host_threads_share=share,
        pool=PoolConfig(size=2, session=SessionConfig(gvisor=True, limits={"pids": SMALL})),
    )
    async with Runtime(config) as small:
        mine = {"label": f"{LABEL_OWNER}={small.config.owner}"}
        with anyio.fail_after(180):
            while not client.api.containers(filters=mine):
                await anyio.sleep(0.5)
        await anyio.sleep(5)  # refills it was refused back off and try again meanwhile
        pooled = len(client.api.containers(all=True, filters=mine))
    print(f"a pool of 2 with room for 1 gVisor session: {pooled} pooled")
    assert pooled == 1


# A controller of its own: opens `tries` small gVisor sessions at once when told "go", prints
# how many opened, and holds them until its standard input closes.
_CONTROLLER = """
import sys, anyio
from caisson import Runtime, RuntimeConfig
from caisson.errors import HostLimit

async def main(share, tries, pids, state):
    counted, release = anyio.Event(), anyio.Event()
    opened, refused = [], []
    async with Runtime(RuntimeConfig(state_dir=state, gc_on_start=False, gvisor_host_threads_share=share)) as rt:
        async def one():
            try:
                async with rt.session(gvisor=True, limits={"pids": pids}):
                    opened.append(1)
                    if len(opened) + len(refused) == tries:
                        counted.set()
                    await release.wait()
            except HostLimit:
                refused.append(1)
                if len(opened) + len(refused) == tries:
                    counted.set()
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)
        async with anyio.create_task_group() as tg:
            for _ in range(tries):
                tg.start_soon(one)
            await counted.wait()
            print(len(opened), flush=True)
            await anyio.to_thread.run_sync(sys.stdin.read)
            release.set()

anyio.run(main, float(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
"""


async def test_controllers_opening_at_once_share_the_budget(rt: Runtime, tmp_path: Path) -> None:
    """Two controllers (processes) on one host, each opening two gVisor sessions at the same
    moment with room for one beside the engine's others: one opens, not one per controller."""
    client = rt.backend.client  # type: ignore[attr-defined]
    most = host_threads.host_budget(1.0)
    assert most is not None
    _, threads = host_threads.held(client)
    share = (threads + gvisor_host_threads(SMALL) + 100) / most
    tries = 2
    procs = [
        await anyio.open_process(
            [sys.executable, "-c", _CONTROLLER, str(share), str(tries), str(SMALL), str(tmp_path / f"c{i}")],
        )
        for i in range(2)
    ]
    try:
        outs = [TextReceiveStream(p.stdout) for p in procs if p.stdout is not None]
        with anyio.fail_after(120):
            for out in outs:
                assert (await _line(out)) == "ready"
            for p in procs:
                assert p.stdin is not None
                await p.stdin.send(b"go\n")
            opened = [int(await _line(out)) for out in outs]
    finally:
        for p in procs:
            if p.stdin is not None:
                await p.stdin.aclose()
        with anyio.fail_after(120):
            for p in procs:
                await p.wait()
    print(f"2 controllers x {tries} gVisor sessions at once, room for 1: tried {2 * tries}, opened {sum(opened)} {opened}")
    assert sum(opened) == 1, opened


async def _line(stream: TextReceiveStream) -> str:
    text = ""
    while "\n" not in text:
        text += await stream.receive()
    return text.strip()
