"""Bulk copy through the daemon (no `docker cp`: works on a remote engine, and what lands is
the agent's): a tar stream in, a tar stream out, in chunks, with bounded memory on both sides.

copy_in extracts as the agent user, confined by Landlock to the destination (level cautious,
write root = destination): a member whose path or symlink leads out of it is refused by the
kernel, whatever the tar says. Modes and symlinks are kept; owners become the agent.
"""

from __future__ import annotations

import os
import posixpath
import tarfile
import tempfile
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import IO

import anyio

from runtime.client.models import Confinement
from runtime.client.primitives import CHUNK, SandboxClient
from runtime.errors import OpError

# Pieces of the tar stream written to the extracting process: small enough for any frame.
PIECE = 1024 * 1024
# Host-side spool of a tar built from a host path: in memory up to this, on disk beyond.
SPOOL_IN_MEMORY = 8 * 1024 * 1024


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


async def _pieces(source: AsyncIterable[bytes] | bytes) -> AsyncIterator[bytes]:
    if isinstance(source, bytes):
        for start in range(0, len(source), PIECE):
            yield source[start : start + PIECE]
        return
    async for chunk in source:
        for start in range(0, len(chunk), PIECE):
            yield chunk[start : start + PIECE]


async def copy_in(client: SandboxClient, source: str | os.PathLike[str] | AsyncIterable[bytes] | bytes, dest: str) -> None:
    """Extract ``source`` (a host path, tar bytes, or an async iterable of tar bytes) into the
    container directory ``dest`` (made if missing), as the agent."""
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


async def copy_out(client: SandboxClient, path: str) -> AsyncIterator[bytes]:
    """A tar of the container path ``path`` (its contents when a directory), in chunks."""
    path = client.resolve(path)
    staged = f"/tmp/.caisson-copy-{uuid.uuid4().hex}.tar"
    is_dir = (await client.stat(path)).type == "dir"
    base, name = (path, ".") if is_dir else posixpath.split(path)
    made = await client.exec(["tar", "-c", "-f", staged, "-C", base, name], timeout=client.config.call_timeout)
    try:
        if made.exit_code != 0:
            raise OpError("copy_failed", f"archiving {path} failed: {made.stderr.strip()[-1000:]}")
        offset = 0
        while True:
            piece = await client.read_range(staged, offset, CHUNK)
            if piece.data:
                yield piece.data
                offset += len(piece.data)
            if piece.eof or not piece.data:
                return
    finally:
        with anyio.CancelScope(shield=True):
            await client.remove(staged, missing_ok=True)


async def copy_out_to(client: SandboxClient, path: str, host_dir: str | os.PathLike[str]) -> None:
    """copy_out extracted into a host directory (made if missing)."""
    target = Path(host_dir)
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY) as spool:
        async for piece in copy_out(client, path):
            await anyio.to_thread.run_sync(spool.write, piece)
        spool.seek(0)

        def extract() -> None:
            # "data": no absolute names, no links or paths out of the target, no device files.
            with tarfile.open(fileobj=spool, mode="r") as tar:
                tar.extractall(target, filter="data")

        await anyio.to_thread.run_sync(extract)
