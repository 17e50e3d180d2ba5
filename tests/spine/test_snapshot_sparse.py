"""A snapshot of a session holding large sparse files keeps them sparse: the engine's disk
grows by about what the files really hold, the session goes on with its files as they were,
and a session opened from the snapshot sees the same content, sizes and holes. A sparse file
the agent replaced by a link, and a link named like one, are not followed."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from caisson import Runtime, Session
from caisson.docker import sparse

pytestmark = [pytest.mark.anyio, pytest.mark.exclusive]

MiB = 2**20
# Four 256 MiB sparse files (1 GiB), each with a few MiB of data at different offsets, one of
# them hard-linked, and a link to a host path among them.
MAKE = (
    "for i in 0 1 2 3; do truncate -s 256M s$i; "
    "head -c 1048576 /dev/urandom | dd of=s$i bs=1M seek=$((i * 50)) conv=notrunc status=none; done; "
    "head -c 100 /dev/urandom >> s3; ln s2 s2-link; ln -s /etc/shadow s-host; "
    "mkdir -p deep/er && truncate -s 64M deep/er/s4; truncate -s 32M \"$(printf 'odd\\nname\\377')\""
)
SHOW = (
    "for f in s0 s1 s2 s2-link s3 deep/er/s4 \"$(printf 'odd\\nname\\377')\"; do "
    "echo $f | od -c | head -1; echo $(stat -c '%s %b %h' \"$f\") $(md5sum < \"$f\"); done; readlink s-host"
)


def _engine_used(root: str) -> int:
    """Bytes of data the engine's btrfs holds (what a snapshot really adds)."""
    os.sync()
    uuid_ = subprocess.run(["findmnt", "-n", "-o", "UUID", "--target", root], capture_output=True, text=True).stdout.strip()
    return int((Path("/sys/fs/btrfs") / uuid_ / "allocation" / "data" / "bytes_used").read_text())


def _on_host(rt: Runtime, container_id: str, names: list[str]) -> dict[str, tuple[int, int, int]]:
    """Each file's size, allocated bytes and inode in the container's layer, as the host sees
    them (gVisor reports a file's blocks from its size, and a second name's size from its cache)."""
    client = rt.backend.client  # type: ignore[attr-defined]
    root = sparse.engine_root(client)
    top = sparse.layer(root, container_id) if root is not None else None
    assert top is not None, "no layer of the container on the host"
    os.sync()
    found = {}
    for name in names:
        st = os.lstat(top / "workspace" / name)
        found[name] = (st.st_size, st.st_blocks * 512, st.st_ino)
    return found


async def snapshot_of_sparse_files(rt: Runtime, s: Session, used: Callable[[], int]) -> tuple[str, str, float, int]:
    """MAKE in the session, then its snapshot: the files as SHOW lists them, the snapshot's
    reference, the seconds it took, and the engine disk it added (``used`` before and after)."""
    made = await s.exec(MAKE, timeout=120)
    assert made.exit_code == 0, made
    files = (await s.exec(SHOW)).stdout
    before = await anyio.to_thread.run_sync(used)
    started = time.monotonic()
    ref = await rt.snapshot(s)
    took = time.monotonic() - started
    return files, ref, took, await anyio.to_thread.run_sync(used) - before


@pytest.mark.parametrize("gvisor", [False, True], ids=["runc", "gvisor"])
async def test_a_snapshot_keeps_sparse_files_sparse(rt: Runtime, gvisor: bool) -> None:
    root = str(rt.backend.client.info()["DockerRootDir"])  # type: ignore[attr-defined]
    async with rt.session(gvisor=gvisor) as s:
        before_files, ref, took, gained = await snapshot_of_sparse_files(rt, s, lambda: _engine_used(root))
        after_files = (await s.exec(SHOW)).stdout
        async with rt.session(image=ref, gvisor=gvisor) as restored:
            restored_files = (await restored.exec(SHOW)).stdout
            # Still one inode for the two names, and each file as writable as before.
            wrote = await restored.exec("echo x >> s2", timeout=30)
            assert wrote.exit_code == 0, wrote
            names = ["s0", "s1", "s2", "s2-link", "s3", "deep/er/s4"]
            host = await anyio.to_thread.run_sync(_on_host, rt, restored.container_id, names)
    runtime = "gVisor" if gvisor else "runc"
    print(f"{runtime}: snapshot of 1.06 GiB of sparse files: {took:.1f} s, engine data +{gained / MiB:.0f} MiB\n{before_files}")
    assert after_files == before_files, "the session's own files changed"
    assert restored_files == before_files, restored_files
    assert host["s2"][0] == 256 * MiB + 2 and host["s2"][2] == host["s2-link"][2], host
    # Allocated stays a few MiB per file: still sparse in the new session's layer.
    for name, (_size, allocated, _ino) in host.items():
        assert allocated < 8 * MiB, (name, allocated)
    assert restored_files.splitlines()[-1] == "/etc/shadow"
    # The files hold about 4 MiB: the commit copied nothing of the holes.
    assert gained < 64 * MiB, f"{gained / MiB:.0f} MiB"

