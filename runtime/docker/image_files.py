"""The files a session's image started with, for diffs: the engine streams the image's tree
through an unstarted container of it (a ``BaseFiles`` of the backend interface).

(The engine's own change list is not used: on overlay2 it misses modified files of a
committed image's directories now and then.) The archive is only read, member by member, in
memory; nothing of it is extracted.
"""

from __future__ import annotations

import hashlib
import io
import posixpath
import tarfile
import time
from collections.abc import Iterator

import docker

from caisson.backend import BaseScan, OldFile
from caisson.docker.containers import LABEL_EXPIRES, LABEL_SESSION, engine_errors
from caisson.errors import OpError
from caisson.workspace_diff import MAX_TEXT

# Longer than any diff takes: a probe older than this was left by a process that died.
PROBE_TTL = 3600


class ImageProbe:
    """An unstarted container of a session's image, to read the files the session started with.
    Labelled to expire soon, so a reaper removes it if this process dies first."""

    def __init__(self, client: docker.DockerClient, container_id: str) -> None:
        self._client = client
        with engine_errors("reading a session's image"):
            image = client.api.inspect_container(container_id)["Image"]
            self._id = client.api.create_container(
                image,
                command=["true"],
                network_disabled=True,
                labels={LABEL_SESSION: "diff-probe", LABEL_EXPIRES: f"{time.time() + PROBE_TTL:.0f}"},
            )["Id"]

    def close(self) -> None:
        with engine_errors("removing a probe container"):
            self._client.api.remove_container(self._id, force=True)

    def _members(self, path: str) -> Iterator[tuple[tarfile.TarInfo, tarfile.TarFile]]:
        try:
            stream, _ = self._client.api.get_archive(self._id, path)
        except docker.errors.NotFound:
            return
        with tarfile.open(fileobj=_Chunks(stream), mode="r|") as tar:
            for member in tar:
                if member.isfile():
                    yield member, tar

    def scan(self, root: str, current: dict[str, tuple[int, int]]) -> BaseScan:
        """Streamed: memory holds only the files that differ."""
        base = posixpath.basename(root.rstrip("/"))
        scan = BaseScan()
        for member, tar in self._members(root):
            rel = posixpath.relpath(member.name, base)
            scan.paths.add(rel)
            extracted = tar.extractfile(member)
            if current.get(rel) == (member.size, int(member.mtime)):
                if extracted is not None:
                    digest = hashlib.sha256()
                    while piece := extracted.read(1024 * 1024):
                        digest.update(piece)
                    scan.ambiguous[rel] = digest.hexdigest()
                continue
            data = extracted.read() if extracted is not None and member.size <= MAX_TEXT else None
            scan.differing[rel] = OldFile(size=member.size, data=data)
        return scan

    def old_file(self, path: str) -> OldFile:
        for member, tar in self._members(path):
            extracted = tar.extractfile(member) if member.size <= MAX_TEXT else None
            return OldFile(size=member.size, data=extracted.read() if extracted is not None else None)
        raise OpError("not_found", f"{path} is not a file in the session's image")


class _Chunks(io.RawIOBase):
    """A file over the engine's chunk iterator, for tarfile's streaming mode."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._rest = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while not self._rest:
            try:
                self._rest = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._rest))
        buffer[:n] = self._rest[:n]
        self._rest = self._rest[n:]
        return n


