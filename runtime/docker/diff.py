"""A session's workspace changes since its container started from its image.

No git and no baseline copy: the image still holds the starting files. The engine streams
the image's tree (through an unstarted container of it) and the daemon lists the current
one; files whose size or modification time differ are read on both sides and compared.
A pooled or forked session's baseline is its image: the snapshot it started from.

(The engine's own change list is not used: on overlay2 it misses modified files of a
committed image's directories now and then.)
"""

from __future__ import annotations

import difflib
import hashlib
import io
import posixpath
import tarfile
import time
from collections.abc import Iterator
from typing import Literal

import docker
from pydantic import BaseModel

from caisson.client.primitives import SandboxClient
from caisson.docker.containers import LABEL_EXPIRES, LABEL_SESSION, engine_errors
from caisson.errors import OpError

# Text larger than this is reported by size, not line by line.
MAX_TEXT = 1024 * 1024
MAX_ENTRIES = 500_000
# Longer than any diff takes: a probe older than this was left by a process that died.
PROBE_TTL = 3600


class FileChange(BaseModel):
    path: str
    change: Literal["added", "modified", "deleted"]
    binary: bool = False
    old_size: int | None = None
    new_size: int | None = None
    diff: str = ""  # unified diff, for text files


class WorkspaceDiff(BaseModel):
    root: str
    changes: list[FileChange]

    def patch(self) -> str:
        """The text changes as one patch (``patch -p1`` / ``git apply`` from ``root``)."""
        return "".join(c.diff for c in self.changes)


class _Old(BaseModel):
    size: int
    data: bytes | None  # None: too large to compare line by line


class Scan(BaseModel):
    """The image's side: files that differ from the current ones in size or mtime, files whose
    size and (whole-second) mtime match so only their content can tell, and every file path."""

    differing: dict[str, _Old] = {}
    ambiguous: dict[str, str] = {}  # path -> sha256
    paths: set[str] = set()


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

    def scan(self, root: str, current: dict[str, tuple[int, int]]) -> Scan:
        """Streamed: memory holds only the files that differ."""
        base = posixpath.basename(root.rstrip("/"))
        scan = Scan()
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
            scan.differing[rel] = _Old(size=member.size, data=data)
        return scan

    def old_file(self, path: str) -> _Old:
        for member, tar in self._members(path):
            extracted = tar.extractfile(member) if member.size <= MAX_TEXT else None
            return _Old(size=member.size, data=extracted.read() if extracted is not None else None)
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


async def current_tree(sandbox: SandboxClient, root: str) -> dict[str, tuple[int, int]]:
    """Regular files beneath ``root`` now: relative path -> (size, whole-second mtime)."""
    try:
        walked = await sandbox.walk(root, include_hidden=True, max_entries=MAX_ENTRIES, ignore_files=())
    except OpError as exc:
        if exc.code == "not_found":
            return {}
        raise
    return {e.path: (e.size, int(e.mtime)) for e in walked.entries if e.type == "file"}


async def changed_among(sandbox: SandboxClient, root: str, hashes: dict[str, str]) -> list[str]:
    """Those of ``hashes`` (path -> the image's sha256) whose current content differs."""
    changed = []
    for rel, digest in hashes.items():
        got = await sandbox.read_range(posixpath.join(root, rel), 0, 0, hash=True)
        if got.sha256 != digest:
            changed.append(rel)
    return changed


async def compare(
    sandbox: SandboxClient, root: str, old: dict[str, _Old], image_paths: set[str], current: dict[str, tuple[int, int]]
) -> WorkspaceDiff:
    """``old``: the image's files that may differ from ``current``; ``image_paths``: all of its files."""
    changes: list[FileChange] = []
    for rel in sorted(set(old) | (set(current) - image_paths)):
        before, now = old.get(rel), current.get(rel)
        after = None
        if now is not None and now[0] <= MAX_TEXT:
            after = await sandbox.read_file(posixpath.join(root, rel))
        if before is not None and now is not None and before.data is not None and before.data == after:
            continue  # touched, not changed
        change: Literal["added", "modified", "deleted"] = (
            "added" if before is None else "deleted" if now is None else "modified"
        )
        old_data = before.data if before is not None else None
        too_big = (before is not None and old_data is None) or (now is not None and after is None)
        binary = too_big or any(_binary(d) for d in (old_data, after) if d is not None)
        entry = FileChange(
            path=rel,
            change=change,
            binary=binary,
            old_size=before.size if before is not None else None,
            new_size=now[0] if now is not None else None,
        )
        if not binary:
            entry.diff = _unified(rel, old_data, after)
        changes.append(entry)
    return WorkspaceDiff(root=root, changes=changes)


def _binary(data: bytes) -> bool:
    if b"\0" in data[:8192]:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


def _unified(rel: str, before: bytes | None, after: bytes | None) -> str:
    lines = difflib.unified_diff(
        (before or b"").decode().splitlines(keepends=True),
        (after or b"").decode().splitlines(keepends=True),
        fromfile="/dev/null" if before is None else f"a/{rel}",
        tofile="/dev/null" if after is None else f"b/{rel}",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)
