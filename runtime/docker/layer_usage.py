"""How much disk a container's writable layer holds, as the soft disk watch reads it.

On a local btrfs data-root with quotas (simple or full), every container's layer is a
subvolume and the kernel keeps its quota group's figure current as blocks are allocated:
allocated bytes rather than apparent sizes (``fallocate --keep-size`` counts), extents of a
file deleted while still open (they stay allocated until the last descriptor closes), and the
layer's metadata (an inode flood counts); and, reserved apart until written back, the data
still in the page cache. Reading it is two small sysfs files, however many files the layer holds. Elsewhere the only figure is the engine's size of the layer
(``SizeRw``): apparent sizes summed by a walk of the whole tree on every query.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
from collections.abc import Collection
from pathlib import Path

import docker
import docker.errors

from caisson.docker.containers import engine_errors

# BTRFS_IOC_INO_LOOKUP (_IOWR(0x94, 18, 4096-byte args)): asked for the subvolume root's
# inode (256), it answers the subvolume's id, whose quota group is 0/<id>.
_INO_LOOKUP = (3 << 30) | (4096 << 16) | (0x94 << 8) | 18
_SUBVOLUME_ROOT = 256


def _subvolume_id(path: Path) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        args = bytearray(struct.pack("QQ", 0, _SUBVOLUME_ROOT) + bytes(4080))
        fcntl.ioctl(fd, _INO_LOOKUP, args)
        return int(struct.unpack_from("Q", args)[0])
    finally:
        os.close(fd)


class LayerSizes:
    """Each container's layer size, by the cheapest figure this engine offers."""

    def __init__(self, client: docker.DockerClient, *, figures: bool = True) -> None:
        """``figures``: use the file system's figures where it keeps them (off: only the
        engine's walk, as on overlay2, to measure and test that path on any engine)."""
        self._client = client
        with engine_errors("asking the engine where its data lives"):
            info = client.info()
        self._root = Path(str(info.get("DockerRootDir") or ""))
        self._qgroups = self._local_btrfs_qgroups() if figures and info.get("Driver") == "btrfs" else None
        # container id -> its layer's quota group in sysfs (found once).
        self._figures: dict[str, Path] = {}

    @property
    def mechanism(self) -> str:
        """What the figures are: "btrfs-qgroup-figure" (cheap, allocated) or "engine-size" (a walk, apparent)."""
        return "btrfs-qgroup-figure" if self._qgroups is not None else "engine-size"

    def _local_btrfs_qgroups(self) -> Path | None:
        """The file system's quota groups when the engine's data-root is a btrfs this host mounts."""
        if not self._root.is_dir():
            return None  # a remote engine
        found = subprocess.run(
            ["findmnt", "-n", "-o", "UUID", "--target", str(self._root)], capture_output=True, text=True, check=False
        )
        qgroups = Path("/sys/fs/btrfs") / found.stdout.strip() / "qgroups"
        enabled = qgroups / "enabled"
        if found.returncode != 0 or not found.stdout.strip() or not enabled.is_file():
            return None
        return qgroups if enabled.read_text().strip() == "1" else None

    def quick(self, container_id: str) -> int | None:
        """The layer's allocated bytes when the file system keeps that figure, else None (then
        only ``engine`` can tell). Constant cost."""
        if self._qgroups is None:
            return None
        figure = self._figures.get(container_id)
        if figure is None:
            mounts = self._root / "image" / "btrfs" / "layerdb" / "mounts" / container_id / "mount-id"
            try:
                mount_id = mounts.read_text().strip()
                if not mount_id.isalnum():
                    return None
                subvolume = _subvolume_id(self._root / "btrfs" / "subvolumes" / mount_id)
            except OSError:
                return None  # not made yet, or already removed
            figure = self._figures[container_id] = self._qgroups / f"0_{subvolume}"
        try:
            # Written back and allocated, plus written but still cached (the deleted open file
            # a writer keeps flushing sits there until the next commit).
            return int((figure / "referenced").read_text()) + int((figure / "rsv_data").read_text())
        except (OSError, ValueError):
            self._figures.pop(container_id, None)
            return None

    def engine(self, container_id: str) -> int:
        """The engine's size of the layer: apparent sizes, walked whole (slow for a large tree)."""
        with engine_errors("measuring a session's disk use"):
            # One container's row (the engine sizes only the containers a listing returns).
            rows = self._client.api.containers(all=True, filters={"id": container_id}, size=True)
        return int(rows[0].get("SizeRw") or 0) if rows else 0

    def retain(self, container_ids: Collection[str]) -> None:
        """Forget the containers no longer watched."""
        for gone in self._figures.keys() - set(container_ids):
            del self._figures[gone]
