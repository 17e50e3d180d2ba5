"""Bulk copy through the daemon (no `docker cp`: works on a remote engine, and what lands is
the agent's): a tar stream in, a tar stream out, in chunks, with bounded memory on both sides.

copy_out's archive is built on the host from the daemon's listing and reads, and copy_out_to
unpacks it with the host's own containment (``extract``), never with ``tarfile``'s.

copy_in extracts as the agent user, confined by Landlock to the destination (level cautious,
write root = destination): a member whose path or symlink leads out of it is refused by the
kernel, whatever the tar says. Modes and symlinks are kept; owners become the agent.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
import tempfile
from collections.abc import AsyncIterable, AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import IO, TypeAlias

import anyio

from caisson.client import extract
from caisson.client.models import Confinement
from caisson.client.primitives import CHUNK, SandboxClient
from caisson.errors import OpError

# Pieces of the tar stream written to the extracting process: small enough for any frame.
PIECE = 1024 * 1024
# Host-side spool of a tar built from a host path: in memory up to this, on disk beyond.
SPOOL_IN_MEMORY = 8 * 1024 * 1024


# What copy_in takes: a host path, tar bytes, a binary file object of a tar (read in pieces on
# a thread), or an async iterable of tar bytes.
CopySource: TypeAlias = "str | os.PathLike[str] | bytes | IO[bytes] | AsyncIterable[bytes]"


def read_whole(fileobj: IO[bytes]) -> bytes:
    """A binary file object's content; a text one (``open(path)`` without ``"rb"``) is refused."""
    data = fileobj.read()
    if not isinstance(data, bytes):
        raise TypeError("copy_in takes a binary file object of a tar: open it with 'rb'")
    return data


def write_tar(path: Path, fileobj: IO[bytes]) -> None:
    """A tar of a host file, or of a directory's contents (not the directory itself), into ``fileobj``."""
    with tarfile.open(fileobj=fileobj, mode="w") as tar:
        if path.is_dir():
            for child in sorted(path.iterdir()):
                tar.add(child, arcname=child.name)
        else:
            tar.add(path, arcname=path.name)


async def _tar_of(path: Path) -> AsyncIterator[bytes]:
    """A tar of a host file or directory (its contents, not the directory itself)."""
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:

        def build() -> None:
            write_tar(path, spool)
            spool.seek(0)

        await anyio.to_thread.run_sync(build)
        while piece := await anyio.to_thread.run_sync(spool.read, PIECE):
            yield piece


async def _pieces(source: AsyncIterable[bytes] | bytes | IO[bytes]) -> AsyncIterator[bytes]:
    if isinstance(source, bytes):
        for start in range(0, len(source), PIECE):
            yield source[start : start + PIECE]
        return
    if not isinstance(source, AsyncIterable):
        while piece := await anyio.to_thread.run_sync(source.read, PIECE):
            if not isinstance(piece, bytes):
                raise TypeError("copy_in takes a binary file object of a tar: open it with 'rb'")
            yield piece
        return
    async for chunk in source:
        for start in range(0, len(chunk), PIECE):
            yield chunk[start : start + PIECE]


async def copy_in(client: SandboxClient, source: CopySource, dest: str) -> None:
    """Extract ``source`` (a host path, tar bytes, a binary file object of a tar, or an async
    iterable of tar bytes) into the container directory ``dest`` (made if missing), as the agent."""
    dest = client.resolve(dest)
    agent = client.confined(Confinement(user=client.config.agent_user))
    await agent.mkdir(dest)
    stream = _tar_of(Path(source)) if isinstance(source, str | os.PathLike) else _pieces(source)
    extractor = agent.confined(
        Confinement(user=client.config.agent_user, level="cautious", write_roots=(dest,), network=False)
    )
    task = await extractor.spawn(["tar", "-x", "-p", "--no-same-owner", "-f", "-"], cwd=dest, name="copy_in")
    try:
        async for piece in stream:
            await extractor.task_write(task.task_id, piece)
        await extractor.task_write(task.task_id, b"", close=True)
        done = await extractor.task_wait(task.task_id, timeout=client.config.call_timeout)
    except BaseException:
        with anyio.CancelScope(shield=True):
            await extractor.task_signal(task.task_id, "KILL")
        raise
    if done.exit_code != 0:
        errors = await extractor.task_read(task.task_id)
        raise OpError("copy_failed", f"extracting into {dest} failed: {errors.stderr.strip()[-1000:] or done}")


def _member(name: str, kind: str, size: int = 0, mode: int = 0o644, mtime: float = 0.0, target: str = "") -> bytes:
    """One tar header, in the PAX format (long names and targets travel whole)."""
    extract.member_parts(name)  # a name that could lead out of a destination is refused here too
    info = tarfile.TarInfo(name)
    info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE}.get(kind, tarfile.REGTYPE)
    info.size, info.mode, info.mtime, info.linkname = size, mode & 0o777, int(mtime), target
    return info.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape")


# A file gone or replaced between the listing and its read: left out, as tar does.
_VANISHED = ("not_found", "is_a_directory", "not_a_directory", "bad_request")


async def _file_member(
    agent: SandboxClient, path: str, name: str, mode: int, mtime: float, plain: bool = False
) -> AsyncIterator[bytes]:
    """A regular file's header and content. The header's size is the file's when its first
    piece is read; a file that grows or shrinks meanwhile is cut or padded to that size.
    ``plain``: a file reached through a link, or with other names (one may be a secret's),
    is left out."""
    try:
        piece = await agent.read_range(path, 0, CHUNK, plain=plain)
    except OpError as exc:
        if exc.code in _VANISHED or (plain and exc.code == "not_plain"):
            return
        raise
    size = piece.size if not piece.eof else len(piece.data)
    yield _member(name, "file", size, mode, mtime)
    sent = 0
    while sent < size:
        data = piece.data[: size - sent]
        if data:
            yield data
            sent += len(data)
        if sent >= size:
            break
        if piece.eof or not piece.data:
            yield bytes(size - sent)  # shrank while read: zeros keep the archive whole
            sent = size
            break
        piece = await agent.read_range(path, sent, CHUNK)
    yield bytes(-size % tarfile.BLOCKSIZE)


async def copy_out(
    client: SandboxClient,
    path: str,
    *,
    roots: Sequence[str] | None = None,
    secret: Callable[[str], bool] | None = None,
) -> AsyncIterator[bytes]:
    """A tar of the container path ``path`` (its contents when a directory), in chunks.

    The host builds the archive from what the daemon lists and reads as the agent, with the
    agent's credentials: no file the agent can write sits between, and no program of the
    container's writes the archive. Directories, regular files and symbolic links are
    archived; FIFOs, sockets and devices are left out.

    With ``roots``, every path must resolve beneath them (the daemon opens them so); with
    ``secret``, files whose container path it names are left out, and so is any file reached
    through a link or with other names, since another name may be a secret's."""
    path = client.resolve(path)
    agent = client.confined(Confinement(user=client.config.agent_user, roots=tuple(roots) if roots is not None else None))
    top = await agent.stat(path)
    if not top.exists:
        raise OpError("not_found", f"no such file or directory: {path}")
    if secret is not None and (secret(path) or (top.realpath is not None and secret(top.realpath))):
        raise OpError("permission_denied", f"{path} is a secret file: it is not copied out unless secrets are included")
    plain = secret is not None

    async def members() -> AsyncIterator[bytes]:
        if top.type != "dir":
            if top.type != "file":
                raise OpError("copy_failed", f"{path} is not a file, directory or symbolic link")
            async for piece in _file_member(agent, path, posixpath.basename(path), top.mode, top.mtime, plain):
                yield piece
            return
        listing = await agent.walk(path, include_hidden=True, ignore_files=(), detail=True)
        if listing.truncated:
            raise OpError(
                "copy_failed",
                f"{path} holds more entries than one copy takes ({len(listing.entries)}): copy its subdirectories one by one",
            )
        # Names as `tar -C path .` gives them ("./name"): what callers of the old archive parse.
        yield _member(".", "dir", 0, top.mode, top.mtime)
        for entry in listing.entries:
            full = posixpath.join(path, entry.path)
            name = "./" + entry.path
            mode = 0o644 if entry.mode is None else entry.mode
            if entry.type == "file" and not (secret is not None and secret(full)):
                async for piece in _file_member(agent, full, name, mode, entry.mtime, plain):
                    yield piece
            elif entry.type in ("dir", "symlink"):
                yield _member(name, entry.type, 0, mode, entry.mtime, entry.target or "")

    # Small members travel together, in pieces of about PIECE bytes.
    pending = bytearray()
    async for piece in members():
        pending += piece
        if len(pending) >= PIECE:
            yield bytes(pending)
            pending.clear()
    pending += bytes(2 * tarfile.BLOCKSIZE)
    yield bytes(pending)


async def copy_out_to(
    client: SandboxClient,
    path: str,
    host_dir: str | os.PathLike[str],
    limits: extract.ExtractLimits | None = None,
    *,
    roots: Sequence[str] | None = None,
    secret: Callable[[str], bool] | None = None,
) -> list[str]:
    """copy_out unpacked into a host directory (made if missing) by the host's own containment;
    returns the symbolic links left out because they lead out of it."""
    return await unpack_to(copy_out(client, path, roots=roots, secret=secret), host_dir, limits)


async def unpack_to(
    stream: AsyncIterable[bytes], host_dir: str | os.PathLike[str], limits: extract.ExtractLimits | None = None
) -> list[str]:
    """A tar stream a sandbox produced, spooled (bounded) and unpacked into ``host_dir``."""
    limits = limits or extract.ExtractLimits()
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
        total = 0
        async for piece in stream:
            total += len(piece)
            if total > limits.max_bytes + limits.max_members * 3 * tarfile.BLOCKSIZE:
                raise OpError("hostile_archive", f"refused the archive, nothing was written: over {limits.max_bytes} bytes")
            await anyio.to_thread.run_sync(spool.write, piece)
        spool.seek(0)
        return await anyio.to_thread.run_sync(extract.extract, spool, host_dir, limits)
