"""Bulk copy in and out through the daemon: ownership, modes, symlinks, a 50 MB tree with
bounded host memory, and tar members that try to leave the destination."""

from __future__ import annotations

import hashlib
import io
import os
import resource
import tarfile
from pathlib import Path

import pytest

from caisson import Runtime
from caisson.errors import OpError

pytestmark = pytest.mark.anyio


def tree(root: Path, files: int = 200, size: int = 256 * 1024) -> dict[str, str]:
    digests = {}
    for i in range(files):
        path = root / f"d{i % 10}" / f"f{i}.bin"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = os.urandom(size)
        path.write_bytes(data)
        digests[str(path.relative_to(root))] = hashlib.sha256(data).hexdigest()
    script = root / "run.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o755)
    (root / "link").symlink_to("d0/f0.bin")
    return digests


async def test_a_tree_goes_in_and_comes_out_whole(rt: Runtime, tmp_path: Path) -> None:
    src = tmp_path / "src"
    digests = tree(src)
    async with rt.session() as s:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        await s.copy_in(src, "/workspace/repo")
        listing = await s.exec("stat -c '%U %a %n' run.sh d0/f0.bin; readlink link; ./run.sh", cwd="/workspace/repo")
        assert listing.stdout.splitlines() == ["agent 755 run.sh", "agent 644 d0/f0.bin", "d0/f0.bin", "ran"]
        await s.copy_out_to("/workspace/repo", tmp_path / "back")
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - before
    back = tmp_path / "back"
    for rel, digest in digests.items():
        assert hashlib.sha256((back / rel).read_bytes()).hexdigest() == digest
    assert os.readlink(back / "link") == "d0/f0.bin" and os.access(back / "run.sh", os.X_OK)
    print(f"copied {len(digests)} files ({len(digests) * 256 // 1024} MB) in and out; host peak RSS grew {grown:.0f} MB")
    # Bounded, not proportional: 150 MB trees grew it by the same ~50 MB (8 MB frames, spools on disk).
    assert grown < 64


def hostile_tar() -> bytes:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        link = tarfile.TarInfo("out")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        tar.addfile(link)
        for name in ("out/caisson-evil", "../escaped", "/abs-evil"):
            member = tarfile.TarInfo(name)
            payload = b"pwned\n"
            member.size = len(payload)
            tar.addfile(member, io.BytesIO(payload))
    return data.getvalue()


async def test_members_that_leave_the_destination_are_refused(rt: Runtime) -> None:
    async with rt.session() as s:
        with pytest.raises(OpError):
            await s.copy_in(hostile_tar(), "/workspace/in")
        landed = await s.exec("ls /etc/caisson-evil /workspace/escaped /abs-evil 2>/dev/null | wc -l", user="root")
        assert landed.stdout.strip() == "0"
