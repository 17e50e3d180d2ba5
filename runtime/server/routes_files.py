"""A tenant's file primitives beyond read and write: stat, a byte range, listings, a walk,
searches, mkdir, remove, rename, the workspace diff, and the daemon's ping. File ops run as the agent
beneath the session's workspace roots; contents come under the secret policy (server.reads),
changes under the write policy (server.writes)."""

from __future__ import annotations

import base64
from typing import Annotated

from fastapi import APIRouter, Query, status

from caisson.client.models import DaemonInfo, DirEntry, FindResult, GrepResult, StatResult, WalkResult
from caisson.client.primitives import CHUNK
from caisson.server import reads, writes
from caisson.server.deps import LiveSession
from caisson.server.models import Created, FindBody, GrepBody, MkdirBody, RangeReply, Removed, RenameBody
from caisson.workspace_diff import WorkspaceDiff

router = APIRouter(tags=["files"])

Path = Annotated[str, Query(min_length=1, max_length=4096, description="a container path; relative to the workdir")]


@router.get("/sessions/{session_id}/stat")
async def stat_path(live: LiveSession, path: Path, follow: bool = True) -> StatResult:
    """What is at ``path`` (``exists`` false when nothing is); ``follow=false`` describes a link itself."""
    return await live.agent.stat(path, follow=follow)


@router.get("/sessions/{session_id}/range")
async def read_range(
    live: LiveSession, path: Path, offset: Annotated[int, Query(ge=0, le=2**62)] = 0,
    length: Annotated[int, Query(ge=-1, le=CHUNK)] = -1, hash: bool = False,
) -> RangeReply:
    """One byte range (at most 8 MiB; -1: as much as that) with the file's size, and its
    sha256 when ``hash``. A secret file, or one with other names, is refused (403)."""
    got = await reads.read_range(live, path, offset, CHUNK if length < 0 else length, hash=hash)
    return RangeReply(data=base64.b64encode(got.data).decode(), size=got.size, offset=got.offset, eof=got.eof, sha256=got.sha256)


@router.get("/sessions/{session_id}/dir")
async def list_dir(live: LiveSession, path: Path) -> list[DirEntry]:
    return await live.agent.list_dir(path)


@router.get("/sessions/{session_id}/walk")
async def walk(
    live: LiveSession, path: Path, include_hidden: bool = False,
    max_entries: Annotated[int, Query(ge=1, le=200_000)] = 200_000,
    ignore_files: Annotated[list[str] | None, Query(max_length=16)] = None, detail: bool = False,
) -> WalkResult:
    """Every entry beneath ``path``, honouring ``ignore_files`` (default ``.gitignore``;
    ``ignore_files=`` once with an empty value: none)."""
    names = (".gitignore",) if ignore_files is None else tuple(n for n in ignore_files if n)
    return await live.agent.walk(
        path, include_hidden=include_hidden, max_entries=max_entries, ignore_files=names, detail=detail
    )


@router.post("/sessions/{session_id}/grep")
async def grep(live: LiveSession, body: GrepBody) -> GrepResult:
    """A content search (ripgrep's, or the daemon's own): files the secret policy hides, and
    files with other names (another may be a secret's), are left out of what it shows."""
    found = await live.agent.grep(**body.model_dump())
    return found.without(live.agent.resolve(body.root), reads.hidden(live))


@router.post("/sessions/{session_id}/find")
async def find(live: LiveSession, body: FindBody) -> FindResult:
    """Files whose path below ``root`` matches ``regex``, newest first or by path (names only,
    as a listing shows them)."""
    return await live.agent.find(**body.model_dump())


@router.post("/sessions/{session_id}/mkdir")
async def mkdir(live: LiveSession, body: MkdirBody) -> Created:
    """Make a directory; decided as a file write is (see ``PUT .../files``)."""
    return Created(created=await writes.mkdir(live, body.path, parents=body.parents, exist_ok=body.exist_ok))


@router.delete("/sessions/{session_id}/files")
async def remove(live: LiveSession, path: Path, recursive: bool = False, missing_ok: bool = False) -> Removed:
    """Remove a file, a link (never its target) or a directory; decided as a file write is."""
    return Removed(removed=await writes.remove(live, path, recursive=recursive, missing_ok=missing_ok))


@router.post("/sessions/{session_id}/rename", status_code=status.HTTP_204_NO_CONTENT)
async def rename(live: LiveSession, body: RenameBody) -> None:
    """Rename (a link is renamed itself); both names, and a directory's every entry at its new
    place, are decided as a file write is."""
    await writes.rename(live, body.src, body.dst, overwrite=body.overwrite)


@router.get("/sessions/{session_id}/diff")
async def diff(live: LiveSession, path: Annotated[str | None, Query(min_length=1, max_length=4096)] = None) -> WorkspaceDiff:
    """Files added, modified and deleted beneath ``path`` (default: the workdir) since the
    session started, with unified diffs; within the workspace roots, secret files left out."""
    return await live.session.diff(path)


@router.get("/sessions/{session_id}/ping")
async def ping(live: LiveSession) -> DaemonInfo:
    """The session's daemon answers: its version, protocol, and what enforces the levels."""
    return await live.session.ping()
