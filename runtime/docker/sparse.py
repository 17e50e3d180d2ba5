"""Sparse files kept sparse through a snapshot, on a local btrfs or overlay2 engine.

The engine commits a container by writing its layer as a tar and unpacking that into a new
layer: a sparse file comes out whole (a 1 GiB file holding a few bytes took 13 s and 1 GiB of
engine disk per snapshot). So while the container is paused, each sparse file of its layer is
cloned (``FICLONE``: the clone shares the file's extents, holes stay holes; where the file
system cannot clone, ext4 under overlay2, its data ranges are copied and its holes left holes)
into a store beside the engine's layers and emptied in place for the commit, then put back
into the same inode before the container runs again (its open descriptors see the same file).
A session opened from the snapshot gets each file from the store into its new layer before
it starts: on btrfs the layer already holds the (emptied) file; on overlay2 it is made in the
layer as overlayfs' copy-up would make it, with its directories, owner, mode and times taken
from the snapshot's own layer, and its other names linked to it. The layers are the agent's
tree: every path is opened component by component without following links.

A controller killed in that window must not cost the agent its files: before the container is
paused, an ``Unfinished`` marker naming the snapshot is written beside the stores (fsync'd) and
locked for as long as its controller works. Whatever later looks at the container (a re-attach,
the reaper, another snapshot) and finds the marker unlocked runs ``recover``: it clones the
stashed files back into the same inodes, removes the half-made snapshot and its store, and
resumes the container.
"""

from __future__ import annotations

import errno
import fcntl
import os
import shutil
import stat
from pathlib import Path

import docker
import docker.errors
from pydantic import BaseModel

from caisson.docker.containers import SNAPSHOT_REPO, engine_address, engine_errors, remove_snapshot
from caisson.errors import SessionError
from caisson.logs import get_logger

log = get_logger("caisson.sparse")

FICLONE = 0x40049409
# A file is kept sparse when its holes hold at least this much: below it, the commit's copy
# costs little.
MIN_HOLES = 16 * 2**20
STORE = "caisson-sparse"
MANIFEST = "manifest.json"
# Beside the stores: one marker per container whose snapshot is under way (named by its id).
UNFINISHED = "unfinished"
# Each engine's data-root (by address), see engine_root.
_ROOTS: dict[str, Path | None] = {}


class Stashed(BaseModel):
    # Relative to the layer's root, as hex of its bytes: the agent's names need not be UTF-8.
    path_hex: str
    size: int
    mtime_ns: int
    # The file's other names in the layer (hard links), in the same form.
    links_hex: list[str] = []


class Manifest(BaseModel):
    files: list[Stashed] = []


class Marked(BaseModel):
    """What an ``Unfinished`` marker holds: the snapshot whose stash it guards."""

    tag: str


def engine_root(client: docker.DockerClient) -> Path | None:
    """The engine's data-root when its layers are btrfs subvolumes or overlay2 directories
    this host reaches, else None (asked once per engine: every removal looks for a stash left
    behind)."""
    url = engine_address(client)
    if url not in _ROOTS:
        with engine_errors("asking the engine where its data lives"):
            info = client.info()
        root = Path(str(info.get("DockerRootDir") or ""))
        driver = str(info.get("Driver"))
        reached = driver in ("btrfs", "overlay2") and (root / _LAYERS[driver]).is_dir()
        _ROOTS[url] = root if reached else None
    return _ROOTS[url]


# Where each storage driver keeps its layers, under the data-root.
_LAYERS = {"btrfs": "btrfs/subvolumes", "overlay2": "overlay2"}


def _mount_id(root: Path, driver: str, container_id: str) -> str | None:
    try:
        mount_id = (root / "image" / driver / "layerdb" / "mounts" / container_id / "mount-id").read_text().strip()
    except OSError:
        return None
    return mount_id if mount_id.isalnum() else None


def layer(root: Path, container_id: str) -> Path | None:
    """The container's own layer as the host sees it: its btrfs subvolume (the whole tree), or
    its overlay2 upper directory (what it changed)."""
    for driver, under in (("btrfs", ""), ("overlay2", "diff")):
        mount_id = _mount_id(root, driver, container_id)
        if mount_id is not None:
            path = root / _LAYERS[driver] / mount_id / under
            return path if path.is_dir() else None
    return None


def image_layer(root: Path, container_id: str) -> Path | None:
    """On overlay2, the newest layer of the container's image (a snapshot's own layer, which
    holds every file the snapshot kept apart); None on btrfs, where the container's layer
    already holds the image's files."""
    mount_id = _mount_id(root, "overlay2", container_id)
    if mount_id is None:
        return None
    layers = (root / "overlay2").resolve()
    try:
        # "l/<short>:l/<short>...", newest first, relative to the driver's directory: the
        # container's init layer (/etc/hosts and the like), then the image's.
        lowers = (layers / mount_id / "lower").read_text().strip().split(":")
    except OSError:
        return None
    for lower in lowers:
        path = (layers / lower).resolve()
        if path.name == "diff" and path.parent.parent == layers and path.parent.name != f"{mount_id}-init":
            return path
    return None


def store(root: Path, snapshot_tag: str) -> Path:
    return root / STORE / snapshot_tag


def _sparse_files(top: Path) -> list[list[str]]:
    """Regular files of the layer whose holes hold at least ``MIN_HOLES`` (never following a
    link), each as its names in the layer (more than one: hard links)."""
    found: dict[int, list[str]] = {}
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
                    found.setdefault(st.st_ino, []).append(os.path.relpath(entry.path, top))
    return list(found.values())


def _parts(relative: str) -> list[str]:
    parts = [p for p in relative.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise OSError(f"not a path inside the layer: {relative!r}")
    return parts


def _open_in(top: Path, relative: str, flags: int) -> int:
    """``relative`` under ``top``, each component opened without following a link."""
    parts = _parts(relative)
    fd = _open_dir(top)
    try:
        for part in parts[:-1]:
            nxt = _open_dir(part, fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)


def _clone(src_fd: int, dst_fd: int) -> None:
    """``dst`` made a copy of ``src``, holes kept: their extents shared where the file system
    clones, else the data ranges copied."""
    try:
        fcntl.ioctl(dst_fd, FICLONE, src_fd)
        return
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOTTY, errno.EINVAL, errno.EXDEV):
            raise
    size = os.fstat(src_fd).st_size
    os.ftruncate(dst_fd, 0)
    os.ftruncate(dst_fd, size)
    offset = 0
    while offset < size:
        try:
            start = os.lseek(src_fd, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole from here to the end
                return
            raise
        end = os.lseek(src_fd, start, os.SEEK_HOLE)
        while start < end:
            copied = os.copy_file_range(src_fd, dst_fd, end - start, start, start)
            if copied == 0:
                raise OSError(errno.EIO, "the file shrank while it was copied")
            start += copied
        offset = end


class _LikeSource:
    """A directory of an overlay2 layer and its counterpart in the snapshot's own layer, walked
    down together (missing ones made in the layer as overlayfs' copy-up makes them: owner,
    mode, times of the snapshot's), neither tree's links followed. Nothing else writes either
    before the container starts. ``close`` gives each directory back its times, as copy-up
    does once it has made an entry in it."""

    def __init__(self, top: Path, source: Path, dirs: list[str]) -> None:
        self._levels: list[tuple[int, int]] = []
        try:
            self._levels.append((_open_dir(top), _open_dir(source)))
            for part in dirs:
                fd, src = self._levels[-1]
                below_src = _open_dir(part, src)
                try:
                    below = _open_dir(part, fd)
                except FileNotFoundError:
                    os.mkdir(part, 0o700, dir_fd=fd)
                    below = _open_dir(part, fd)
                    _same_owner_and_mode(os.fstat(below_src), below)
                self._levels.append((below, below_src))
        except BaseException:
            self.close()
            raise

    @property
    def fd(self) -> int:
        return self._levels[-1][0]

    @property
    def src(self) -> int:
        return self._levels[-1][1]

    def close(self) -> None:
        for fd, src in reversed(self._levels):
            try:
                was = os.fstat(src)
                os.utime(fd, ns=(was.st_atime_ns, was.st_mtime_ns))
            finally:
                os.close(fd)
                os.close(src)
        self._levels = []


def _open_dir(name: str | Path, dir_fd: int | None = None) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd)


def _same_owner_and_mode(was: os.stat_result, fd: int) -> None:
    os.fchown(fd, was.st_uid, was.st_gid)
    os.fchmod(fd, stat.S_IMODE(was.st_mode))


def _made_like(top: Path, source: Path, relative: str) -> int:
    """``relative`` made empty in the overlay2 layer ``top``, with its owner and mode in the
    snapshot's layer ``source`` (its directories too); its descriptor, open for writing."""
    parts = _parts(relative)
    where = _LikeSource(top, source, parts[:-1])
    try:
        was = os.stat(parts[-1], dir_fd=where.src, follow_symlinks=False)
        if not stat.S_ISREG(was.st_mode):
            raise OSError(errno.EINVAL, f"not a regular file in the snapshot's layer: {relative!r}")
        made = os.open(parts[-1], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=where.fd)
        _same_owner_and_mode(was, made)
        return made
    finally:
        where.close()


def _link_in(top: Path, source: Path, first: str, other: str) -> None:
    """``other``, a second name of ``first`` in the snapshot's layer, made a hard link to it in
    the overlay2 layer ``top``."""
    first_parts, parts = _parts(first), _parts(other)
    there = _LikeSource(top, source, first_parts[:-1])
    try:
        here = _LikeSource(top, source, parts[:-1])
        try:
            os.link(first_parts[-1], parts[-1], src_dir_fd=there.fd, dst_dir_fd=here.fd, follow_symlinks=False)
        finally:
            here.close()
    finally:
        there.close()


def _sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, data: str) -> None:
    """Replace ``path`` whole and durably: a reader finds the old text or the new, never a part."""
    part = path.with_name(path.name + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(part, path)
    _sync_dir(path.parent)


class Unfinished:
    """The marker of a container's snapshot under way, held (written, fsync'd, locked) from
    before the pause until ``done``, once its files are back and before the resume. Its lock
    dies with its controller, so an unlocked marker is a stash nobody will finish:
    ``recover``'s to undo."""

    def __init__(self, root: Path, container_id: str, tag: str) -> None:
        self.path = marker_path(root, container_id)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # Written and locked under a name of its own, then linked into place whole: nobody
        # finds it empty or unlocked.
        part = self.path.with_name(f".{container_id}.{os.getpid()}")
        self._fd = os.open(part, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            os.write(self._fd, Marked(tag=tag).model_dump_json().encode())
            os.fsync(self._fd)
            os.link(part, self.path)
        except FileExistsError:
            self.release()
            raise SessionError(
                f"another snapshot of container {container_id[:12]} is under way: wait for it, then try again"
            ) from None
        except BaseException:
            self.release()
            raise
        finally:
            part.unlink()
        _sync_dir(self.path.parent)

    def done(self) -> None:
        """The files are back (the container still paused): nothing left to recover."""
        self.path.unlink()
        _sync_dir(self.path.parent)

    def release(self) -> None:
        """Let go of the lock (once; again does nothing)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def marker_path(root: Path, container_id: str) -> Path:
    """Where the marker of a snapshot under way in ``container_id`` lies."""
    return root / STORE / UNFINISHED / container_id


def stash(top: Path, into: Path) -> None:
    """Clone each sparse file of a paused container's layer into ``into`` and empty it in place.
    Each clone and the manifest naming it are on disk before the file is emptied, so
    ``put_back`` undoes a stash that stopped anywhere."""
    into.mkdir(parents=True)
    _sync_dir(into.parent)
    manifest = Manifest()
    _write_synced(into / MANIFEST, manifest.model_dump_json())
    for names in _sparse_files(top):
        relative = names[0]
        fd = _open_in(top, relative, os.O_RDWR)
        try:
            st = os.fstat(fd)
            kept = os.open(into / str(len(manifest.files)), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                _clone(fd, kept)
                os.fsync(kept)
            finally:
                os.close(kept)
            manifest.files.append(Stashed(
                path_hex=os.fsencode(relative).hex(), size=st.st_size, mtime_ns=st.st_mtime_ns,
                links_hex=[os.fsencode(name).hex() for name in names[1:]],
            ))
            _write_synced(into / MANIFEST, manifest.model_dump_json())
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)


def put_back(top: Path, kept: Path, source: Path | None = None) -> int:
    """Clone the stashed files into the layer ``top`` (emptied ones, or a new session's from the
    snapshot), keeping their times; how many. ``source``: on overlay2, the snapshot's own layer,
    for a new session's layer that does not hold the files yet. Done twice, it gives the same files."""
    manifest = Manifest.model_validate_json((kept / MANIFEST).read_text())
    for i, file in enumerate(manifest.files):
        relative = os.fsdecode(bytes.fromhex(file.path_hex))
        try:
            fd = _open_in(top, relative, os.O_WRONLY)
        except FileNotFoundError:
            if source is None:
                raise
            fd = _made_like(top, source, relative)
            for other in file.links_hex:
                _link_in(top, source, relative, os.fsdecode(bytes.fromhex(other)))
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


def _unfinished(root: Path, container_id: str) -> tuple[int, str] | None:
    """The container's marker, locked, and the snapshot it names, when its controller is gone
    (None: no marker, or its controller still at work). The caller closes the descriptor."""
    try:
        fd = os.open(marker_path(root, container_id), os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_nlink == 0:
            raise BlockingIOError  # finished while this looked
        return fd, Marked.model_validate_json(os.read(fd, 4096)).tag
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise


def _drop(client: docker.DockerClient, root: Path, tag: str) -> None:
    """The half-made snapshot and its store (before the container may run again: a store left
    beside a running container would be cloned over the agent's newer writes)."""
    remove_snapshot(client, f"{SNAPSHOT_REPO}:{tag}")
    remove(root, tag)


def _unmark(root: Path, container_id: str) -> None:
    path = marker_path(root, container_id)
    path.unlink()
    _sync_dir(path.parent)


def recover(client: docker.DockerClient, container_id: str, *, resume_unmarked: bool) -> str | None:
    """Finish what a snapshot whose controller died left in a container: its sparse files
    cloned back from the store (into the same inodes), the half-made snapshot and its store
    removed, the container resumed; what was done (None: nothing). ``resume_unmarked``: also
    resume a container found paused with no unfinished stash. A stash whose controller still
    holds its marker is left to that controller."""
    root = engine_root(client)
    found = _unfinished(root, container_id) if root is not None else None
    done: str | None = None
    if root is not None and found is not None:
        fd, tag = found
        try:
            # Files are put back only into a paused container: one that runs has had them back.
            paused = _paused(client, container_id)
            kept = store(root, tag)
            top = layer(root, container_id)
            restored = put_back(top, kept) if paused and top is not None and (kept / MANIFEST).is_file() else 0
            _drop(client, root, tag)
            _resume(client, container_id)
            _unmark(root, container_id)
            done = f"a dead controller's snapshot undone: {restored} sparse files put back, the container resumed"
        finally:
            os.close(fd)
    elif resume_unmarked and _resume(client, container_id):
        done = "resumed: found paused with no snapshot under way"
    if done is not None:
        log.warning("recovered a session's container", container=container_id[:12], what=done)
    return done


def forget(client: docker.DockerClient, container_id: str) -> None:
    """After the container's removal: what a dead controller's snapshot of it left (the
    half-made image, its store, the marker) goes too."""
    root = engine_root(client)
    found = _unfinished(root, container_id) if root is not None else None
    if root is not None and found is not None:
        fd, tag = found
        try:
            _drop(client, root, tag)
            _unmark(root, container_id)
        finally:
            os.close(fd)


def _paused(client: docker.DockerClient, container_id: str) -> bool:
    try:
        with engine_errors("looking at a session's container"):
            return bool((client.api.inspect_container(container_id).get("State") or {}).get("Paused"))
    except docker.errors.NotFound:
        return False


def _resume(client: docker.DockerClient, container_id: str) -> bool:
    """Unpause the container if it is paused; whether it was."""
    if not _paused(client, container_id):
        return False
    try:
        with engine_errors("resuming a paused session"):
            client.api.unpause(container_id)
    except docker.errors.NotFound:
        return False
    return True
