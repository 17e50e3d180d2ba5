"""Sparse files kept sparse through a snapshot, on a local btrfs engine.

The engine commits a container by writing its layer as a tar and unpacking that into a new
layer: a sparse file comes out whole (a 1 GiB file holding a few bytes took 13 s and 1 GiB of
engine disk per snapshot). So while the container is paused, each sparse file of its layer is
cloned (``FICLONE``: the clone shares the file's extents, holes stay holes) into a store
beside the engine's layers and emptied in place for the commit, then cloned back into the
same inode before the container runs again (its open descriptors see the same file). A
session opened from the snapshot gets each file cloned from the store into its new layer
before it starts. The layer is the agent's tree: every path is opened component by component
without following links.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import docker
from pydantic import BaseModel

from caisson.docker.containers import engine_errors

FICLONE = 0x40049409
# A file is kept sparse when its holes hold at least this much: below it, the commit's copy
# costs little.
MIN_HOLES = 16 * 2**20
STORE = "caisson-sparse"
MANIFEST = "manifest.json"


class Stashed(BaseModel):
    # Relative to the layer's root, as hex of its bytes: the agent's names need not be UTF-8.
    path_hex: str
    size: int
    mtime_ns: int


class Manifest(BaseModel):
    files: list[Stashed] = []


def engine_root(client: docker.DockerClient) -> Path | None:
    """The engine's data-root when it is a btrfs this host reaches, else None."""
    with engine_errors("asking the engine where its data lives"):
        info = client.info()
    root = Path(str(info.get("DockerRootDir") or ""))
    return root if info.get("Driver") == "btrfs" and (root / "btrfs" / "subvolumes").is_dir() else None


def layer(root: Path, container_id: str) -> Path | None:
    try:
        mount_id = (root / "image" / "btrfs" / "layerdb" / "mounts" / container_id / "mount-id").read_text().strip()
    except OSError:
        return None
    path = root / "btrfs" / "subvolumes" / mount_id
    return path if mount_id.isalnum() and path.is_dir() else None


def store(root: Path, snapshot_tag: str) -> Path:
    return root / STORE / snapshot_tag


def _sparse_files(top: Path) -> list[str]:
    """Regular files of the layer whose holes hold at least ``MIN_HOLES`` (never following a link)."""
    found: list[str] = []
    device = top.stat().st_dev
    pending = [top]
    while pending:
        with os.scandir(pending.pop()) as entries:
            for entry in entries:
                st = entry.stat(follow_symlinks=False)
                if st.st_dev != device:
                    continue
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif entry.is_file(follow_symlinks=False) and st.st_size - st.st_blocks * 512 >= MIN_HOLES:
                    found.append(os.path.relpath(entry.path, top))
    return found


def _open_in(top: Path, relative: str, flags: int) -> int:
    """``relative`` under ``top``, each component opened without following a link."""
    parts = [p for p in relative.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise OSError(f"not a path inside the layer: {relative!r}")
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)


def _clone(src_fd: int, dst_fd: int) -> None:
    fcntl.ioctl(dst_fd, FICLONE, src_fd)


def stash(top: Path, into: Path) -> None:
    """Clone each sparse file of a paused container's layer into ``into`` and empty it in place.
    The manifest is written after each file, so ``put_back`` undoes a stash that failed midway."""
    into.mkdir(parents=True)
    manifest = Manifest()
    (into / MANIFEST).write_text(manifest.model_dump_json())
    for relative in _sparse_files(top):
        fd = _open_in(top, relative, os.O_RDWR)
        try:
            st = os.fstat(fd)
            kept = os.open(into / str(len(manifest.files)), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                _clone(fd, kept)
            finally:
                os.close(kept)
            manifest.files.append(
                Stashed(path_hex=os.fsencode(relative).hex(), size=st.st_size, mtime_ns=st.st_mtime_ns)
            )
            (into / MANIFEST).write_text(manifest.model_dump_json())
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)


def put_back(top: Path, kept: Path) -> int:
    """Clone the stashed files into the layer ``top`` (emptied ones, or a new session's from the
    snapshot), keeping their times; how many."""
    manifest = Manifest.model_validate_json((kept / MANIFEST).read_text())
    for i, file in enumerate(manifest.files):
        fd = _open_in(top, os.fsdecode(bytes.fromhex(file.path_hex)), os.O_WRONLY)
        try:
            src = os.open(kept / str(i), os.O_RDONLY)
            try:
                _clone(src, fd)
            finally:
                os.close(src)
            os.utime(fd, ns=(file.mtime_ns, file.mtime_ns))
        finally:
            os.close(fd)
    return len(manifest.files)


def allocated(kept: Path) -> int:
    """The blocks a snapshot's kept files hold (0 when it kept none)."""
    if not kept.is_dir():
        return 0
    return sum(p.stat().st_blocks * 512 for p in kept.iterdir() if p.name != MANIFEST)


def remove(root: Path, snapshot_tag: str) -> None:
    shutil.rmtree(store(root, snapshot_tag), ignore_errors=True)
