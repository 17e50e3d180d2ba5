"""A session's workspace changes since its container started from its image.

No git and no baseline copy: the image still holds the starting files. The backend reads the
image's side (``Backend.base_files``) and the daemon lists the current one; files whose size
or modification time differ are read on both sides and compared. A pooled or forked session's
baseline is its image: the snapshot it started from.
"""

from __future__ import annotations

import difflib
import posixpath
from typing import Literal

from pydantic import BaseModel

from caisson.backend import OldFile
from caisson.client.primitives import SandboxClient
from caisson.errors import OpError

# Text larger than this is reported by size, not line by line (the backend reads no more).
MAX_TEXT = 1024 * 1024
MAX_ENTRIES = 500_000


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
        """The text changes as one patch, paths relative to ``root`` (``git apply`` or
        ``patch -p1`` there); a repository's ``.git`` is never in it."""
        return "".join(c.diff for c in self.changes)


def in_git_metadata(rel: str) -> bool:
    """A path inside a repository's ``.git``: its objects and logs are not the work, and a
    patch naming them is refused whole by ``git apply``."""
    return ".git" in rel.split("/")


async def current_tree(sandbox: SandboxClient, root: str) -> dict[str, tuple[int, int]]:
    """Regular files beneath ``root`` now, outside any ``.git``: relative path -> (size,
    whole-second mtime)."""
    try:
        walked = await sandbox.walk(root, include_hidden=True, max_entries=MAX_ENTRIES, ignore_files=())
    except OpError as exc:
        if exc.code == "not_found":
            return {}
        raise
    return {e.path: (e.size, int(e.mtime)) for e in walked.entries if e.type == "file" and not in_git_metadata(e.path)}


async def changed_among(sandbox: SandboxClient, root: str, hashes: dict[str, str]) -> list[str]:
    """Those of ``hashes`` (path -> the image's sha256) whose current content differs."""
    changed = []
    for rel, digest in hashes.items():
        got = await sandbox.read_range(posixpath.join(root, rel), 0, 0, hash=True)
        if got.sha256 != digest:
            changed.append(rel)
    return changed


async def compare(
    sandbox: SandboxClient, root: str, old: dict[str, OldFile], image_paths: set[str], current: dict[str, tuple[int, int]]
) -> WorkspaceDiff:
    """``old``: the image's files that may differ from ``current``; ``image_paths``: all of its files."""
    changes: list[FileChange] = []
    for rel in sorted(r for r in set(old) | (set(current) - image_paths) if not in_git_metadata(r)):
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
