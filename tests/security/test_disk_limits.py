"""A session's disk as an attacker would fill it: every writer that outran the soft watch,
against a 300 MiB ``limits.disk`` (30 MiB for the inode flood) on the engine the set-up gives (btrfs with quotas here).

For each writer: the host disk gained (free space of the engine's data-root, synced, before
and after) must stay within the quota + 10 %, the session must still answer, and a bystander
session's calls keep answering meanwhile (its slowest call is printed)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
import pytest

from caisson import Runtime
from caisson.client.models import ExecResult
from caisson.config import Limits
from caisson.docker import containers

pytestmark = [pytest.mark.anyio, pytest.mark.exclusive]

QUOTA = 300 * 1024**2
HELD = {"a deleted file kept open"}
# The inode flood runs against a smaller quota: the same bound, reached in a tenth of the files
# (845,390 empty files filled 300 MiB here, and each must be made and then removed).
QUOTAS = {"empty files until refused": 30 * 1024**2}

WRITERS = {
    "dd 4 GiB": "dd if=/dev/zero of=big bs=1M count=4096",
    "4 parallel dd": "for i in 1 2 3 4; do dd if=/dev/zero of=big$i bs=1M count=1024 & done; wait",
    "fallocate 9 x 1 GiB": "for i in 1 2 3 4 5 6 7 8 9; do fallocate -l 1G f$i; done",
    # keep-size opens without O_CREAT: the file must exist first, or nothing is allocated.
    "fallocate --keep-size 3 x 2 GiB": "for i in 1 2 3; do touch k$i; fallocate --keep-size -l 2G k$i; done",
    # Held open while the host measures (spawned, see HELD): its space is freed at exit.
    "a deleted file kept open": (
        "python3 -c \"import os, sys, time\nf=open('gone','wb'); os.unlink('gone')\nb=bytes(1<<20)\n"
        "try:\n  [f.write(b) or f.flush() for _ in range(3072)]\nexcept OSError as e: print(e)\n"
        "print('held', flush=True); time.sleep(600)\""
    ),
    "sparse file, then filled": "truncate -s 2G sparse && dd if=/dev/zero of=sparse bs=1M count=2048 conv=notrunc",
    "/tmp and home, not the workspace": "dd if=/dev/zero of=/tmp/t bs=1M count=1024; dd if=/dev/zero of=$HOME/h bs=1M count=1024",
    "empty files until refused": (
        "python3 -c \"import os\nn=0\ntry:\n  while n < 2000000:\n    os.close(os.open('m%d' % n, os.O_CREAT|os.O_WRONLY)); n += 1\n"
        "except OSError as e: print(n, e)\""
    ),
}


def _used(root: str) -> int:
    """Bytes the engine's data-root really holds, once what earlier sessions left is gone
    (btrfs cleans deleted subvolumes in the background: wait for it, or it hides a writer).
    On btrfs, the bytes its data and metadata use (its free space moves by whole chunks of up
    to a GiB, which says nothing of a writer; metadata is also kept twice on one device, so
    the raw disk behind an inode flood is up to twice this); elsewhere, what ``df`` shows."""
    _cleaned(root)
    os.sync()
    uuid_ = subprocess.run(["findmnt", "-n", "-o", "UUID", "--target", root], capture_output=True, text=True).stdout.strip()
    allocation = Path("/sys/fs/btrfs") / uuid_ / "allocation"
    if uuid_ and allocation.is_dir():
        return sum(int((allocation / kind / "bytes_used").read_text()) for kind in ("data", "metadata", "system"))
    st = os.statvfs(root)
    return (st.f_blocks - st.f_bavail) * st.f_frsize


@pytest.fixture(scope="module", autouse=True)
def _settled(rt: Runtime) -> Iterator[None]:
    """After this module's gigabytes, wait until btrfs has cleaned the removed containers' subvolumes,
    so its cleaner's work does not weigh on the tests that follow."""
    yield
    _cleaned(str(rt.backend.client.info()["DockerRootDir"]))  # type: ignore[attr-defined]


def _cleaned(root: str) -> None:
    """Wait until btrfs has cleaned the subvolumes of removed containers (nothing elsewhere)."""
    subprocess.run(["btrfs", "subvolume", "sync", root], capture_output=True, timeout=600, check=False)


async def bystander(rt: Runtime, slowest: list[float], stop: anyio.Event, limits: Limits | None = None) -> None:
    """Another session calling all along (the slowest call kept in ``slowest``), alive at the end."""
    async with rt.session(limits=limits or Limits()) as other:
        while not stop.is_set():
            started = time.monotonic()
            assert (await other.exec("true", timeout=60)).exit_code == 0
            slowest[0] = max(slowest[0], time.monotonic() - started)
            await anyio.sleep(0.05)
        assert (await other.exec("echo alive", timeout=60)).stdout == "alive\n"


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_every_writer_stops_at_the_quota(rt: Runtime, gvisor: bool) -> None:
    mechanism = containers.quota_mechanism(rt.backend.client)
    assert mechanism is not None, "the test engine must bound a container's disk (scripts/setup.sh gives it btrfs)"
    root = str(rt.backend.client.info()["DockerRootDir"])
    tried = landed = 0
    slowest = [0.0]
    stop = anyio.Event()
    async with anyio.create_task_group() as tg, AsyncExitStack() as sessions:
        tg.start_soon(bystander, rt, slowest, stop)
        for name, command in WRITERS.items():
            quota = QUOTAS.get(name, QUOTA)
            # Each writer's session stays until all are measured: the space of a removed one is
            # given back by btrfs' cleaner in the background (10-20 s each with quotas), which
            # the next writer's measurement would have to wait for.
            limits = Limits(disk=f"{quota // 1024**2}m")
            s = await sessions.enter_async_context(rt.session(gvisor=gvisor, limits=limits))
            before = await anyio.to_thread.run_sync(_used, root)
            if name in HELD:
                task = await s.spawn(command)
                out = ""
                while "held" not in out:
                    chunk = await s.task_read(task.task_id, wait=5)
                    out += chunk.stdout + chunk.stderr
                    assert chunk.running or "held" in out, out
                r = ExecResult(stdout=out, stderr="", exit_code=None)
            else:
                r = await s.exec(command, timeout=300)
            gained = await anyio.to_thread.run_sync(_used, root) - before
            if name in HELD:
                await s.task_signal(task.task_id)
            alive = await s.exec("echo alive", timeout=60)
            tried += 1
            over = gained > quota * 1.1
            landed += over
            said = (r.stdout + r.stderr).strip().splitlines()[-1:] or [""]
            answers = alive.stdout == "alive\n"
            print(f"  {name} ({'gVisor' if gvisor else 'runc'}): host disk gained {gained / 1024**2:.0f} MiB, "
                  f"session {'answers' if answers else 'LOST'}; it said {said[0][:100]!r}")
            assert answers, name
            assert not over, f"{name}: {gained / 1024**2:.0f} MiB"
        stop.set()
    print(f"disk writers ({mechanism}, {'gVisor' if gvisor else 'runc'}): tried {tried}, landed {landed} past quota + 10 %; "
          f"slowest bystander call {slowest[0]:.2f} s")
    assert landed == 0 and slowest[0] < 30


async def test_a_write_past_the_quota_says_so(rt: Runtime) -> None:
    async with rt.session(limits=Limits(disk="100m")) as s:
        r = await s.call("bash", {"command": "head -c 200000000 /dev/zero > big; echo rc=$?"})
        text = r.text
        assert "Disk quota exceeded" in text or "No space left" in text, text
        assert (await s.exec("echo still", timeout=30)).stdout == "still\n"


async def test_a_session_at_its_quota_keeps_its_controller(rt: Runtime) -> None:
    """The controller's lease is a file it renews in the container: a full quota must not
    stop that, or the daemon takes its controller for gone and ends the session."""
    # Once btrfs has cleaned the writers' sessions above: meanwhile its cleaner held the
    # engine's calls, renewals too, for over 40 s (a slow engine is not what this test is about).
    await anyio.to_thread.run_sync(_cleaned, str(rt.backend.client.info()["DockerRootDir"]))  # type: ignore[attr-defined]
    # A session whose quota is full, then idle for three graces.
    async with rt.session(limits=Limits(disk="30m"), grace=10) as s:
        full = await s.exec(
            "python3 -c \"import os\nn=0\ntry:\n  while True:\n    os.close(os.open('m%d' % n, os.O_CREAT|os.O_WRONLY)); n += 1\n"
            "except OSError as e: print(e)\"", timeout=300,
        )
        assert "Disk quota exceeded" in full.stdout, full
        await anyio.sleep(30)  # three graces without a request
        assert (await s.exec("echo alive", timeout=30)).stdout == "alive\n"
