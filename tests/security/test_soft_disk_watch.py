"""The host's soft disk watch as an attacker would outrun it, forced on (``soft_disk_watch``)
on the set-up's btrfs engine: no engine limit, only the watch between a session and the disk.

Every writer that went unnoticed by the old watch (which summed apparent sizes through the
engine's walk of the whole layer) must now end its session: keep-size fallocate, a file
written after its unlink while held open, a flood of empty files. For each: how far past the
quota the session was when the watch ended it, and how long that took, are printed; the
soft bound's overshoot is the documented gap (README "Known limits"), so what is asserted is
that every writer is stopped and the others' sessions keep answering. A 200,000-file tree
must not slow the watch's rounds."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import anyio
import pytest

from caisson import Runtime
from caisson.config import Limits, RuntimeConfig
from caisson.docker.backend import DockerBackend
from caisson.docker.disk_watch import DiskWatch
from caisson.errors import DaemonDied, SessionError
from caisson.session import Session
from tests.security.test_disk_limits import bystander

pytestmark = [pytest.mark.anyio, pytest.mark.exclusive]

QUOTA = 300 * 1024**2
# The flood of empty files against a smaller quota: the same bound in a tenth of the files
# (gVisor makes files slowly: 300 MiB of them took minutes).
QUOTAS = {"empty files": 30 * 1024**2}
# Seconds a writer may live past its command before it counts as not stopped.
STOP_WITHIN = 30.0

WRITERS = {
    "dd 4 GiB": "dd if=/dev/zero of=big bs=1M count=4096",
    "fallocate 9 x 1 GiB": "for i in 1 2 3 4 5 6 7 8 9; do fallocate -l 1G f$i; done",
    "fallocate --keep-size 3 x 2 GiB": "for i in 1 2 3; do touch k$i; fallocate --keep-size -l 2G k$i; done",
    "a deleted file kept open": (
        "python3 -c \"import os\nf=open('gone','wb'); os.unlink('gone')\nb=bytes(1<<20)\n"
        "for _ in range(3072): f.write(b); f.flush()\nimport time; time.sleep(600)\""
    ),
    "empty files": (
        "python3 -c \"import os\nfor n in range(2000000): os.close(os.open('m%d' % n, os.O_CREAT|os.O_WRONLY))\n"
        "import time; time.sleep(600)\""
    ),
}


@pytest.fixture(scope="module")
async def soft(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Runtime]:
    state = tmp_path_factory.mktemp("caisson-soft")
    async with Runtime(RuntimeConfig(state_dir=str(state), soft_disk_watch=True, gc_on_start=False)) as rt:
        yield rt


def _backend(rt: Runtime) -> DockerBackend:
    assert isinstance(rt.backend, DockerBackend)
    return rt.backend


def _watch(rt: Runtime) -> DiskWatch:
    watch = _backend(rt).disk_watch
    assert watch is not None
    return watch


async def _stopped(s: Session, command: str) -> tuple[float | None, str]:
    """Seconds from the writer's start until its session was ended (None if it lived on), and
    what the session's caller was told."""
    started = time.monotonic()
    try:
        said = await s.exec(command, timeout=300)
        print(f"    the writer finished: {(said.stdout + said.stderr).strip()[-100:]!r}")
        while time.monotonic() - started < STOP_WITHIN + 300:
            await s.exec("true", timeout=30)
            await anyio.sleep(0.1)
            if time.monotonic() - started > STOP_WITHIN:
                break
    except DaemonDied as exc:
        return time.monotonic() - started, str(exc)
    return None, ""


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_every_writer_is_stopped_by_the_soft_watch(soft: Runtime, gvisor: bool) -> None:
    watch = _watch(soft)
    assert watch.sizes.mechanism == "btrfs-qgroup-figure", "the test engine is the set-up's btrfs with quotas"
    tried = landed = 0
    slowest = [0.0]
    stop = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(bystander, soft, slowest, stop, Limits(disk="300m"))
        for name, command in WRITERS.items():
            quota = QUOTAS.get(name, QUOTA)
            async with soft.session(gvisor=gvisor, limits=Limits(disk=f"{quota // 1024**2}m")) as s:
                after, told = await _stopped(s, command)
                assert after is None or ("disk quota" in told and "caisson doctor" in told), told
                # A session left running holds what the file system says (a writer the kernel
                # refused, as gVisor refuses keep-size fallocate, holds nothing).
                held = watch.ended[s.container_id] if after is not None else watch.sizes.quick(s.container_id) or 0
            tried += 1
            landed += after is None and held > quota
            print(f"  {name} ({'gVisor' if gvisor else 'runc'}): " + (
                f"not stopped, holding {held / 2**20:.0f} MiB" if after is None else
                f"ended after {after:.1f} s holding {held / 2**20:.0f} MiB, {(held - quota) / 2**20:.0f} MiB past the quota"))
        stop.set()
    print(f"soft watch ({watch.sizes.mechanism}, {'gVisor' if gvisor else 'runc'}): tried {tried}, landed {landed} "
          f"(over the quota and not stopped within {STOP_WITHIN:g} s); "
          f"slowest bystander call {slowest[0]:.2f} s")
    assert landed == 0 and slowest[0] < 30


async def test_a_large_tree_does_not_slow_the_watch(soft: Runtime) -> None:
    """200,000 files in one session: the watch's rounds stay as cheap as before, and a writer
    in another session is still stopped."""
    watch = _watch(soft)
    async with soft.session(limits=Limits(disk="2g")) as heavy:
        await anyio.sleep(2)
        before = max(r.slowest_s for r in list(watch.rounds)[-4:])
        made = await heavy.exec(
            "python3 -c \"import os\nfor n in range(200000): os.close(os.open('t%d' % n, os.O_CREAT|os.O_WRONLY))\n"
            "print(len(os.listdir('.')))\"", timeout=600,
        )
        assert made.stdout.strip() == "200000", made
        await anyio.sleep(3)
        recent = list(watch.rounds)[-6:]
        with_tree = max(r.slowest_s for r in recent)
        cpu = max(r.cpu_s for r in recent)
        async with soft.session(limits=Limits(disk="100m")) as writer:
            after, told = await _stopped(writer, "fallocate -l 4G big")
        print(f"200,000 files held: slowest measurement {before * 1000:.2f} ms before, {with_tree * 1000:.2f} ms with it; "
              f"round CPU {cpu * 1000:.2f} ms; another session's fallocate ended after "
              + ("NEVER" if after is None else f"{after:.1f} s"))
        assert after is not None and "disk quota" in told, told
        # The engine's walk of such a tree took 5.5-6.3 s; a figure read takes well under a ms
        # (the margin is for a loaded machine).
        assert with_tree < 1.0, "a round read the heavy session's layer by walking it"
        assert (await heavy.exec("echo alive", timeout=60)).stdout == "alive\n"


async def test_strict_quotas_refuse_the_soft_watch(soft: Runtime) -> None:
    with pytest.raises(SessionError) as refused:
        async with soft.session(limits=Limits(disk="100m"), strict_quotas=True):
            pass
    assert "strict_quotas" in str(refused.value) and "soft" in str(refused.value)



async def test_an_engine_walk_of_a_large_tree_does_not_hold_up_the_others(soft: Runtime) -> None:
    """Where only the engine's walk can tell (overlay2), one session's walk of 200,000 files
    takes seconds: a second watch reading engine sizes alone must still end another session
    that goes over within a few rounds."""
    client = _backend(soft).client
    # No limits.disk of their own: only this test's watch bounds them.
    async with soft.session(limits=Limits(disk=None)) as heavy, soft.session(limits=Limits(disk=None)) as writer:
        made = await heavy.exec(
            "python3 -c \"import os\nfor n in range(200000): os.close(os.open('t%d' % n, os.O_CREAT|os.O_WRONLY))\"",
            timeout=600,
        )
        assert made.exit_code == 0, made
        quotas = {heavy.container_id: 2 * 1024**3, writer.container_id: 100 * 1024**2}
        watch = await anyio.to_thread.run_sync(lambda: DiskWatch(client, lambda: quotas, figures=False))
        assert watch.sizes.mechanism == "engine-size"
        watch.start()
        try:
            started = time.monotonic()
            heavy_walk = await anyio.to_thread.run_sync(watch.sizes.engine, heavy.container_id)
            walk_s = time.monotonic() - started
            # This watch is not the runtime's: the session's caller is told only that it is gone.
            after, _ = await _stopped(writer, "head -c 300000000 /dev/zero > big")
        finally:
            await anyio.to_thread.run_sync(watch.stop)
        slowest = max(r.slowest_s for r in watch.rounds)
        print(f"engine sizes only: the heavy session's walk took {walk_s:.1f} s ({heavy_walk / 2**20:.0f} MiB); "
              f"the writer ended after " + ("NEVER" if after is None else f"{after:.1f} s")
              + f"; slowest measurement a round used {slowest:.1f} s; round CPU at most "
              f"{max(r.cpu_s for r in watch.rounds) * 1000:.1f} ms")
        assert after is not None
        assert watch.ended[writer.container_id] > 100 * 1024**2
