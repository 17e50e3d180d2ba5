"""Snapshots on an overlay2 engine (a throwaway one beside the host's, on this host's ext4,
which cannot clone a file: the stash copies the data ranges and leaves the holes): sparse
files stay sparse, and a controller killed mid-snapshot costs the agent nothing. One engine
for the module; its own data-root, so nothing else on the host moves its figures."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest

from caisson import Runtime
from caisson.bench.disk import overlay2_runtime
from tests.spine.test_snapshot_crash import killed_mid_snapshot
from tests.spine.test_snapshot_sparse import SHOW, MiB, snapshot_of_sparse_files

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def o2(rt: Runtime) -> AsyncIterator[Runtime]:
    async with overlay2_runtime(rt, None) as runtime:
        yield runtime


def _allocated(root: Path) -> int:
    """Bytes the engine's data-root holds on the disk (its own file system is the host's)."""
    os.sync()
    total = 0
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            try:
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
            except OSError:
                continue  # gone meanwhile
    return total


def _in_upper(upper: Path, names: list[str]) -> dict[str, tuple[int, int, int]]:
    """Each file's size, allocated bytes and inode in a container's overlay2 layer (the engine
    names its directory)."""
    found = {}
    for name in names:
        st = os.lstat(upper / "workspace" / name)
        found[name] = (st.st_size, st.st_blocks * 512, st.st_ino)
    return found


async def test_a_snapshot_keeps_sparse_files_sparse(o2: Runtime) -> None:
    """As on btrfs (test_snapshot_sparse). A new session's layer holds none of the image's
    files: each kept file is made there as overlayfs would copy it up, its second name a link
    to it. Before, the commit wrote every hole out (8.3 s and +1,376 MiB)."""
    client = o2.backend.client  # type: ignore[attr-defined]
    root = Path(str(client.info()["DockerRootDir"]))
    async with o2.session() as s:
        before_files, ref, took, gained = await snapshot_of_sparse_files(o2, s, lambda: _allocated(root))
        print(f"overlay2: snapshot of 1.06 GiB of sparse files: {took:.1f} s, engine disk +{gained / MiB:.0f} MiB")
        # The files hold about 4 MiB: the commit copied nothing of the holes.
        assert gained < 64 * MiB, f"{gained / MiB:.0f} MiB"
        after_files = (await s.exec(SHOW)).stdout
        async with o2.session(image=ref) as restored:
            restored_files = (await restored.exec(SHOW)).stdout
            wrote = await restored.exec("echo x >> s2", timeout=30)
            assert wrote.exit_code == 0, wrote
            with_link = (await restored.exec("stat -c %s s2-link")).stdout
            names = ["s0", "s1", "s2", "s2-link", "s3", "deep/er/s4"]
            upper = Path(client.api.inspect_container(restored.container_id)["GraphDriver"]["Data"]["UpperDir"])
            host = await anyio.to_thread.run_sync(_in_upper, upper, names)
    print(before_files)
    assert after_files == before_files, "the session's own files changed"
    assert restored_files == before_files, restored_files
    assert with_link == f"{256 * MiB + 2}\n", "the second name is not the same file"
    assert host["s2"][2] == host["s2-link"][2], host
    for name, (_size, allocated, _ino) in host.items():
        assert allocated < 8 * MiB, (name, allocated)


async def test_a_controller_killed_mid_snapshot_loses_no_file(o2: Runtime, tmp_path: Path) -> None:
    await killed_mid_snapshot(o2, tmp_path)
